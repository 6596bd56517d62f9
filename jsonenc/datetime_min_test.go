package jsonenc

import (
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// TestTypelessMinDateTime: a DataSet field holding the minimum DateTime, written
// without UaType (Verbose collapsed, NonReversible104, samples), carries
// "0001-01-01T00:00:00Z"; null or an absent Value would read as "no value". With
// UaType the Value may still be left out: the type says what the NULL is.
func TestTypelessMinDateTime(t *testing.T) {
	min := ua.DataValue{Value: ua.NewDateTimeVariant(0), SourceTimestamp: testTime}
	cases := []struct {
		name string
		mode DataSetMessageContentMask
		fcm  DataSetFieldContentMask
		fmt  Format
		want string
	}{
		{"Verbose Variant", FieldEncodingBits(Verbose), 0, FormatPubSub, `"T":"0001-01-01T00:00:00Z"`},
		{"Verbose DataValue", FieldEncodingBits(Verbose), FieldMaskSourceTimestamp, FormatPubSub, `"T":{"Value":"0001-01-01T00:00:00Z","SourceTimestamp":`},
		{"NonReversible104 DataValue", FieldEncodingBits(NonReversible104), FieldMaskSourceTimestamp, FormatPubSub, `"T":{"Value":"0001-01-01T00:00:00Z"`},
		{"samples", FieldEncodingBits(Verbose), 0, FormatSamples, `"Value":{"Value":"0001-01-01T00:00:00Z"`},
		{"Compact keeps UaType", FieldEncodingBits(Compact), 0, FormatPubSub, `"T":{"UaType":13}`},
	}
	for _, c := range cases {
		var col collector
		w := NewNetworkMessageWriter(WriterOptions{Sink: col.sink, Format: c.fmt})
		hdr := NetworkMessageHeader{MessageID: "m", ContentMask: NMNetworkMessageHeader | NMDataSetMessageHeader}
		dsm := DataSetMessageHeader{DataSetWriterID: 1, Type: KeyFrame, ContentMask: c.mode, FieldContentMask: c.fcm}
		err := writeMessage(t, w, hdr, []DataSetMessageHeader{dsm}, []string{"T"}, []ua.DataValue{min})
		w.Release()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(col.msgs) != 1 || !strings.Contains(string(col.msgs[0]), c.want) {
			t.Errorf("%s: got %s, want it to contain %s", c.name, col.msgs, c.want)
		}
	}
}

// TestDateTimeClampAgreesWithUA: ua.NewDateTime and DateTime.Time clamp at the
// same instant as the JSON encoder: 9999-12-31T23:59:59Z.
func TestDateTimeClampAgreesWithUA(t *testing.T) {
	at := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	if got := ua.NewDateTime(at); got != ua.MaxDateTime {
		t.Errorf("ua.NewDateTime(%v) = %d, want MaxDateTime", at, got)
	}
	before := ua.NewDateTime(at.Add(-100 * time.Nanosecond))
	if int64(before) != maxTicks-1 {
		t.Errorf("100 ns before the maximum: %d, want %d", before, maxTicks-1)
	}
	if got := ua.DateTime(maxTicks).Time(); !got.Equal(at) {
		t.Errorf("DateTime(maxTicks).Time() = %v", got)
	}
	if got := string(appendDateTime(nil, ua.DateTime(maxTicks+5), nil)); got != `"`+maxDateTimeText+`"` {
		t.Errorf("JSON of maxTicks+5 = %s", got)
	}
}
