package jsonenc

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/uagate/gateway/uastack/ua"
)

type collector struct{ msgs [][]byte }

func (c *collector) sink(msg []byte) error {
	c.msgs = append(c.msgs, append([]byte(nil), msg...))
	return nil
}

func writeMessage(t testing.TB, w *NetworkMessageWriter, hdr NetworkMessageHeader, dsms []DataSetMessageHeader, names []string, dvs []ua.DataValue) error {
	t.Helper()
	if err := w.Begin(&hdr); err != nil {
		return err
	}
	for i := range dsms {
		if err := w.BeginDataSetMessage(&dsms[i]); err != nil {
			return err
		}
		if dsms[i].Type != KeepAlive {
			for j := range dvs {
				if err := w.AddField(names[j], &dvs[j]); err != nil {
					return err
				}
			}
		}
		if err := w.EndDataSetMessage(); err != nil {
			return err
		}
	}
	return w.End()
}

func TestNetworkMessageVerboseExample(t *testing.T) {
	// The worked example of UA-JSON.md §5.1, writer 101 (DataValue fields).
	var c collector
	w := NewNetworkMessageWriter(WriterOptions{Sink: c.sink, HeaderMode: Verbose})
	defer w.Release()
	hdr := NetworkMessageHeader{MessageID: "32235546-05d9-4fd7-97df-ea3ff3408574", PublisherID: "Plant1-Line4", WriterGroupName: "WG1",
		ContentMask: NMNetworkMessageHeader | NMDataSetMessageHeader | NMPublisherID | NMWriterGroupName}
	dsm := DataSetMessageHeader{DataSetWriterID: 101, DataSetWriterName: "Temperatures", SequenceNumber: 4711,
		MetaDataVersion: ConfigurationVersion{672341762, 672341799}, Timestamp: testTime, Status: ua.StatusUncertain, Type: KeyFrame,
		ContentMask: 0x87F, FieldContentMask: FieldMaskStatusCode | FieldMaskSourceTimestamp}
	var nan ua.Variant
	nan.SetDouble(nanValue())
	dvs := []ua.DataValue{
		{Value: ua.NewDoubleVariant(25.5), SourceTimestamp: testTime2},
		{Value: nan, Status: ua.StatusBadSensorFailure, SourceTimestamp: testTime},
		{SourceTimestamp: testTime2},
	}
	if err := writeMessage(t, w, hdr, []DataSetMessageHeader{dsm}, []string{"Inlet", "Outlet", "Ambient"}, dvs); err != nil {
		t.Fatal(err)
	}
	want := `{"MessageId":"32235546-05d9-4fd7-97df-ea3ff3408574","MessageType":"ua-data","PublisherId":"Plant1-Line4","WriterGroupName":"WG1","Messages":[` +
		`{"DataSetWriterId":101,"DataSetWriterName":"Temperatures","SequenceNumber":4711,"MetaDataVersion":{"MajorVersion":672341762,"MinorVersion":672341799},` +
		`"Timestamp":"2024-05-01T10:15:30.1234567Z","Status":{"Code":1073741824,"Symbol":"Uncertain"},"MessageType":"ua-keyframe","Payload":{` +
		`"Inlet":{"Value":25.5,"SourceTimestamp":"2024-05-01T10:15:30.2Z"},` +
		`"Outlet":{"Value":"NaN","Status":{"Code":2156658688,"Symbol":"BadSensorFailure"},"SourceTimestamp":"2024-05-01T10:15:30.1234567Z"},` +
		`"Ambient":{"SourceTimestamp":"2024-05-01T10:15:30.2Z"}}}]}`
	if len(c.msgs) != 1 || string(c.msgs[0]) != want {
		t.Fatalf("got %d messages:\n%s\nwant\n%s", len(c.msgs), c.msgs, want)
	}
	nm, err := testDecoder().DecodeNetworkMessage(c.msgs[0], FieldTypes{"Inlet": ua.TypeDouble, "Outlet": ua.TypeDouble})
	if err != nil {
		t.Fatal(err)
	}
	m := nm.Messages[0]
	if nm.PublisherID != "Plant1-Line4" || m.DataSetWriterID != 101 || m.SequenceNumber != 4711 || m.Status != ua.StatusUncertain ||
		len(m.Fields) != 3 || m.Fields[0].Value.Value.Double() != 25.5 || m.Fields[1].Value.Status != ua.StatusBadSensorFailure {
		t.Fatalf("decoded %+v", nm)
	}
}

func nanValue() float64 { var z float64; return z / z }

// TestShapes covers the top-level shapes of Part 14 Table (UA-JSON.md §4.6)
// with Variant fields in every field encoding, and decodes each back.
func TestShapes(t *testing.T) {
	names := []string{"A", "B", "C"}
	var i64 ua.Variant
	i64.SetInt64(9007199254740993)
	dvs := []ua.DataValue{{Value: ua.NewDoubleVariant(1.5)}, {Value: i64}, {Value: ua.NewStringVariant("x"), Status: ua.StatusBadNoData}}
	types := FieldTypes{"A": ua.TypeDouble, "B": ua.TypeInt64, "C": ua.TypeString}
	masks := []NetworkMessageContentMask{
		NMNetworkMessageHeader | NMDataSetMessageHeader | NMPublisherID | NMDataSetClassID,
		NMNetworkMessageHeader | NMDataSetMessageHeader | NMSingleDataSetMessage,
		NMNetworkMessageHeader,
		NMDataSetMessageHeader,
		LayoutDataSetMessage,
		LayoutMinimal,
		0,
	}
	for _, mask := range masks {
		for _, mode := range allModes {
			var c collector
			w := NewNetworkMessageWriter(WriterOptions{Sink: c.sink})
			hdr := NetworkMessageHeader{PublisherID: "P", DataSetClassID: testGuid, ContentMask: mask}
			dsm := DataSetMessageHeader{DataSetWriterID: 7, PublisherID: "P", SequenceNumber: 1, Type: DeltaFrame,
				ContentMask: DSMDataSetWriterID | DSMSequenceNumber | DSMMessageType | DSMPublisherID | FieldEncodingBits(mode)}
			if err := writeMessage(t, w, hdr, []DataSetMessageHeader{dsm, dsm}, names, dvs); err != nil {
				t.Fatal(err)
			}
			w.Release()
			wantMsgs := 1
			if mask&NMSingleDataSetMessage != 0 {
				wantMsgs = 2
			}
			if len(c.msgs) != wantMsgs {
				t.Fatalf("mask %#x %s: %d messages, want %d", mask, mode, len(c.msgs), wantMsgs)
			}
			var fields int
			for _, msg := range c.msgs {
				if !json.Valid(msg) {
					t.Fatalf("mask %#x %s: invalid JSON %s", mask, mode, msg)
				}
				nm, err := testDecoder().DecodeNetworkMessage(msg, types)
				if err != nil {
					t.Fatalf("mask %#x %s: %s: %v", mask, mode, msg, err)
				}
				for _, m := range nm.Messages {
					fields += len(m.Fields)
					if mode == NonReversible104 {
						continue
					}
					if got := m.Fields[1].Value.Value.Int64(); got != 9007199254740993 {
						t.Errorf("mask %#x %s: B = %d in %s", mask, mode, got, msg)
					}
					// Variant representation: the Bad status replaces the value.
					if got := m.Fields[2].Value.Value.StatusCode(); got != ua.StatusBadNoData {
						t.Errorf("mask %#x %s: C = %v in %s", mask, mode, m.Fields[2].Value, msg)
					}
				}
			}
			if fields != 6 {
				t.Errorf("mask %#x %s: %d fields decoded, want 6", mask, mode, fields)
			}
			if testing.Verbose() {
				t.Logf("mask %#x %s: %s", mask, mode, c.msgs[0])
			}
		}
	}
}

func TestKeepAliveAndEvent(t *testing.T) {
	var c collector
	w := NewNetworkMessageWriter(WriterOptions{Sink: c.sink})
	defer w.Release()
	hdr := NetworkMessageHeader{MessageID: "m", ContentMask: LayoutNetworkMessage}
	ka := DataSetMessageHeader{DataSetWriterID: 102, SequenceNumber: 99, Timestamp: testTime, Type: KeepAlive,
		ContentMask: DSMDataSetWriterID | DSMSequenceNumber | DSMTimestamp | DSMMessageType | FieldEncodingBits(Verbose)}
	ev := ka
	ev.Type = Event
	if err := w.Begin(&hdr); err != nil {
		t.Fatal(err)
	}
	w.BeginDataSetMessage(&ka)
	if err := w.AddField("x", &ua.DataValue{}); !errors.Is(err, ErrState) {
		t.Fatalf("field in keep-alive: %v", err)
	}
	w.EndDataSetMessage()
	w.BeginDataSetMessage(&ev)
	w.AddField("Message", &ua.DataValue{Value: ua.NewStringVariant("hi")})
	w.EndDataSetMessage()
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	want := `{"MessageId":"m","MessageType":"ua-data","PublisherId":"","Messages":[{"DataSetWriterId":102,"SequenceNumber":99,"Timestamp":"2024-05-01T10:15:30.1234567Z","MessageType":"ua-keepalive"},` +
		`{"DataSetWriterId":102,"SequenceNumber":99,"Timestamp":"2024-05-01T10:15:30.1234567Z","MessageType":"ua-event","Payload":{"Message":"hi"}}]}`
	if string(c.msgs[0]) != want {
		t.Fatalf("got\n%s\nwant\n%s", c.msgs[0], want)
	}
	nm, err := testDecoder().DecodeNetworkMessage(c.msgs[0], nil)
	if err != nil || len(nm.Messages) != 2 || nm.Messages[0].Type != KeepAlive || nm.Messages[1].Type != Event {
		t.Fatalf("%+v %v", nm, err)
	}
}

// TestSplit: with MaxMessageSize every message stays within the limit, is
// valid JSON, and together they carry every field exactly once, in order.
func TestSplit(t *testing.T) {
	names, dvs := benchFields(300)
	for _, gz := range []bool{false, true} {
		for _, mode := range allModes {
			for _, maxSize := range []int{700, 1500, 4096, 20000} {
				for _, mask := range []NetworkMessageContentMask{LayoutNetworkMessage, LayoutDataSetMessage, NMDataSetMessageHeader} {
					var c collector
					w := NewNetworkMessageWriter(WriterOptions{Sink: c.sink, MaxMessageSize: maxSize, Gzip: gz})
					hdr := NetworkMessageHeader{MessageID: "id", PublisherID: "P", ContentMask: mask}
					dsm := benchDSM(mode)
					dsm2 := dsm
					dsm2.DataSetWriterID = 102
					if err := writeMessage(t, w, hdr, []DataSetMessageHeader{dsm, dsm2}, names, dvs); err != nil {
						t.Fatalf("max %d %s: %v", maxSize, mode, err)
					}
					w.Release()
					var got []string
					ids := map[string]bool{}
					seqs := map[uint16]uint32{} // next SequenceNumber per writer
					for _, msg := range c.msgs {
						if len(msg) > maxSize {
							t.Fatalf("max %d %s gzip=%v: message of %d bytes", maxSize, mode, gz, len(msg))
						}
						if gz {
							r, err := gzip.NewReader(bytes.NewReader(msg))
							if err != nil {
								t.Fatal(err)
							}
							if msg, err = io.ReadAll(r); err != nil {
								t.Fatal(err)
							}
						}
						if !json.Valid(msg) {
							t.Fatalf("invalid JSON: %s", msg)
						}
						nm, err := testDecoder().DecodeNetworkMessage(msg, nil)
						if err != nil {
							t.Fatal(err)
						}
						if mask&NMNetworkMessageHeader != 0 {
							if ids[nm.MessageID] {
								t.Fatalf("duplicate MessageId %q", nm.MessageID)
							}
							ids[nm.MessageID] = true
						}
						for _, m := range nm.Messages {
							for _, f := range m.Fields {
								got = append(got, f.Name)
							}
							if m.DataSetWriterID == 0 {
								continue // no DataSetMessage header
							}
							want, ok := seqs[m.DataSetWriterID]
							if !ok {
								want = dsm.SequenceNumber
							}
							if m.SequenceNumber != want {
								t.Fatalf("max %d %s: writer %d part with SequenceNumber %d, want %d", maxSize, mode, m.DataSetWriterID, m.SequenceNumber, want)
							}
							seqs[m.DataSetWriterID] = want + 1
							if m.Type == KeyFrame && len(m.Fields) != len(names) {
								t.Fatalf("max %d %s: a ua-keyframe of %d fields, want all %d", maxSize, mode, len(m.Fields), len(names))
							}
						}
					}
					if mask&NMDataSetMessageHeader != 0 && len(seqs) != 2 {
						t.Fatalf("max %d %s mask %#x: sequence numbers of %d writers seen, want 2", maxSize, mode, mask, len(seqs))
					}
					want := append(append([]string(nil), names...), names...)
					if strings.Join(got, ",") != strings.Join(want, ",") {
						t.Fatalf("max %d %s mask %#x: fields %d, want %d", maxSize, mode, mask, len(got), len(want))
					}
					if maxSize < 20000 && len(c.msgs) < 2 {
						t.Fatalf("max %d: not split", maxSize)
					}
				}
			}
		}
	}
}

// TestSplitContinuation: a DataSetMessage split into parts gives every part its
// own SequenceNumber, consecutive from the header's, and a split key frame is
// sent as delta frames only, so that ua-keyframe always means a complete key
// frame; NextSequenceNumber reports the number after the last part. A key frame
// that fits stays a key frame, and the budget held room for the rewrite.
func TestSplitContinuation(t *testing.T) {
	for _, maxSize := range []int{500, 800, 1200, 5000} {
		var c collector
		w := NewNetworkMessageWriter(WriterOptions{Sink: c.sink, MaxMessageSize: maxSize})
		names, dvs := benchFields(10)
		dsm := benchDSM(Compact)
		if err := writeMessage(t, w, NetworkMessageHeader{MessageID: "id", ContentMask: LayoutNetworkMessage}, []DataSetMessageHeader{dsm}, names, dvs); err != nil {
			t.Fatal(err)
		}
		next := w.NextSequenceNumber()
		w.Release()
		if maxSize < 5000 && len(c.msgs) < 2 {
			t.Fatalf("max %d: not split", maxSize)
		}
		fields := 0
		for i, msg := range c.msgs {
			if len(msg) > maxSize {
				t.Errorf("max %d part %d: %d bytes", maxSize, i, len(msg))
			}
			nm, err := testDecoder().DecodeNetworkMessage(msg, nil)
			if err != nil {
				t.Fatal(err)
			}
			m := nm.Messages[0]
			fields += len(m.Fields)
			wantType, wantID := DeltaFrame, "id"
			if len(c.msgs) == 1 {
				wantType = KeyFrame
			}
			if i > 0 {
				wantID = "id-" + string(rune('0'+i))
			}
			if m.Type != wantType || m.SequenceNumber != dsm.SequenceNumber+uint32(i) || nm.MessageID != wantID {
				t.Errorf("max %d part %d of %d: type %v seq %d id %q, want %v %d %q", maxSize, i, len(c.msgs), m.Type, m.SequenceNumber, nm.MessageID,
					wantType, dsm.SequenceNumber+uint32(i), wantID)
			}
		}
		if fields != len(names) {
			t.Errorf("max %d: %d fields in the parts, want %d", maxSize, fields, len(names))
		}
		if want := dsm.SequenceNumber + uint32(len(c.msgs)); next != want {
			t.Errorf("max %d: NextSequenceNumber %d after %d parts, want %d", maxSize, next, len(c.msgs), want)
		}
	}
	// A keep-alive announces the next number without using it.
	var c collector
	w := NewNetworkMessageWriter(WriterOptions{Sink: c.sink, MaxMessageSize: 800})
	defer w.Release()
	ka := DataSetMessageHeader{DataSetWriterID: 1, SequenceNumber: 9, Type: KeepAlive, ContentMask: DSMSequenceNumber | DSMMessageType}
	if err := writeMessage(t, w, NetworkMessageHeader{ContentMask: LayoutNetworkMessage}, []DataSetMessageHeader{ka}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if w.NextSequenceNumber() != 9 {
		t.Errorf("after a keep-alive: NextSequenceNumber %d, want 9", w.NextSequenceNumber())
	}
}

func TestFieldTooLarge(t *testing.T) {
	var c collector
	w := NewNetworkMessageWriter(WriterOptions{Sink: c.sink, MaxMessageSize: 300})
	defer w.Release()
	hdr := NetworkMessageHeader{MessageID: "id", ContentMask: LayoutNetworkMessage}
	dsm := benchDSM(Verbose)
	w.Begin(&hdr)
	w.BeginDataSetMessage(&dsm)
	if err := w.AddField("small", &ua.DataValue{Value: ua.NewInt32Variant(1)}); err != nil {
		t.Fatal(err)
	}
	big := ua.DataValue{Value: ua.NewStringVariant(strings.Repeat("x", 400))}
	if err := w.AddField("big", &big); !errors.Is(err, ErrFieldTooLarge) || !strings.Contains(err.Error(), `"big"`) {
		t.Fatalf("got %v", err)
	}
	if err := w.AddField("after", &ua.DataValue{Value: ua.NewInt32Variant(2)}); err != nil {
		t.Fatal(err)
	}
	w.EndDataSetMessage()
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, msg := range c.msgs {
		if len(msg) > 300 || !json.Valid(msg) {
			t.Fatalf("bad message %s", msg)
		}
		nm, _ := testDecoder().DecodeNetworkMessage(msg, nil)
		for _, f := range nm.Messages[0].Fields {
			names = append(names, f.Name)
		}
	}
	if strings.Join(names, ",") != "small,after" {
		t.Fatalf("fields %v", names)
	}
}

func TestSamplesFormat(t *testing.T) {
	var c collector
	w := NewNetworkMessageWriter(WriterOptions{Sink: c.sink, Format: FormatSamples, NamespaceURIs: []string{UANamespace, "http://microsoft.com/Opc/OpcPlc/"}})
	defer w.Release()
	hdr := NetworkMessageHeader{}
	dsm := DataSetMessageHeader{DataSetWriterID: 1000, PublisherID: "opc.tcp://opcplc:50000_D09D61EF", SequenceNumber: 120,
		Timestamp: testTime, EndpointURL: "opc.tcp://opcplc:50000/", ApplicationURI: "urn:OpcPlc:opcplc",
		ContentMask: DSMDataSetWriterID | DSMSequenceNumber | FieldEncodingBits(Verbose)}
	node := ua.NewStringNodeID(1, "StepUp")
	w.Begin(&hdr)
	w.BeginDataSetMessage(&dsm)
	w.AddFieldNode("StepUp", &node, &ua.DataValue{Value: ua.NewInt32Variant(21713), SourceTimestamp: testTime, ServerTimestamp: testTime2})
	w.AddFieldNode("Bad", &node, &ua.DataValue{Status: ua.StatusBadNoCommunication, SourceTimestamp: testTime})
	w.EndDataSetMessage()
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	want := `[{"NodeId":"nsu=http://microsoft.com/Opc/OpcPlc/;s=StepUp","EndpointUrl":"opc.tcp://opcplc:50000/","ApplicationUri":"urn:OpcPlc:opcplc","DisplayName":"StepUp",` +
		`"Timestamp":"2024-05-01T10:15:30.1234567Z","Value":{"Value":21713,"SourceTimestamp":"2024-05-01T10:15:30.1234567Z","ServerTimestamp":"2024-05-01T10:15:30.2Z"},` +
		`"SequenceNumber":120,"ExtensionFields":{"PublisherId":"opc.tcp://opcplc:50000_D09D61EF","DataSetWriterId":"1000"}},` +
		`{"NodeId":"nsu=http://microsoft.com/Opc/OpcPlc/;s=StepUp","EndpointUrl":"opc.tcp://opcplc:50000/","ApplicationUri":"urn:OpcPlc:opcplc","DisplayName":"Bad",` +
		`"Timestamp":"2024-05-01T10:15:30.1234567Z","Value":{"StatusCode":{"Symbol":"BadNoCommunication","Code":2150694912},"SourceTimestamp":"2024-05-01T10:15:30.1234567Z"},` +
		`"SequenceNumber":120,"ExtensionFields":{"PublisherId":"opc.tcp://opcplc:50000_D09D61EF","DataSetWriterId":"1000"}}]`
	if len(c.msgs) != 1 || string(c.msgs[0]) != want {
		t.Fatalf("got\n%s\nwant\n%s", c.msgs, want)
	}
	samples, err := testDecoder().DecodeSamples(c.msgs[0], FieldTypes{"StepUp": ua.TypeInt32})
	if err != nil || len(samples) != 2 || samples[0].Value.Value.Int32() != 21713 || samples[1].Value.Status != ua.StatusBadNoCommunication {
		t.Fatalf("%+v %v", samples, err)
	}
	// Single-message mode: one sample per message.
	var c2 collector
	w2 := NewNetworkMessageWriter(WriterOptions{Sink: c2.sink, Format: FormatSamples})
	defer w2.Release()
	hdr.ContentMask = NMSingleDataSetMessage
	w2.Begin(&hdr)
	w2.BeginDataSetMessage(&dsm)
	for i := 0; i < 3; i++ {
		w2.AddField("v", &ua.DataValue{Value: ua.NewInt32Variant(int32(i))})
	}
	w2.EndDataSetMessage()
	w2.End()
	if len(c2.msgs) != 3 || c2.msgs[0][0] != '{' {
		t.Fatalf("single samples: %s", c2.msgs)
	}
}

func TestMetaDataAndStatus(t *testing.T) {
	md := &ua.DataSetMetaDataType{
		Namespaces:  []string{UANamespace, "http://example.com/plant/"},
		Name:        "DataSet1",
		Description: ua.LocalizedText{Locale: "en", Text: "Line 4 temperatures"},
		Fields: []ua.FieldMetaData{
			{Name: "Inlet", BuiltInType: 11, DataType: ua.NewNumericNodeID(0, 11), ValueRank: -1, DataSetFieldID: testGuid,
				Properties: []ua.KeyValuePair{{Key: ua.NewQualifiedName(0, "EngineeringUnits"), Value: ua.NewStringVariant("°C")}}},
			{Name: "Mode", BuiltInType: 6, DataType: ua.NewNumericNodeID(1, 3001), ValueRank: -1, ArrayDimensions: []uint32{}},
		},
		EnumDataTypes: []ua.EnumDescription{{DataTypeId: ua.NewNumericNodeID(1, 3001), Name: ua.NewQualifiedName(1, "OperatingMode"), BuiltInType: 6,
			EnumDefinition: ua.EnumDefinition{Fields: []ua.EnumField{{Name: "Manual", Value: 0}, {Name: "Auto", Value: 1}}}}},
		StructureDataTypes: []ua.StructureDescription{{DataTypeId: ua.NewNumericNodeID(1, 3002), Name: ua.NewQualifiedName(1, "Point"),
			StructureDefinition: ua.StructureDefinition{BaseDataType: ua.NewNumericNodeID(0, 22), StructureType: ua.StructureTypeStructure,
				Fields: []ua.StructureField{{Name: "X", DataType: ua.NewNumericNodeID(0, 11), ValueRank: -1}}}}},
		ConfigurationVersion: ua.ConfigurationVersionDataType{MajorVersion: 672341762, MinorVersion: 672341799},
	}
	for _, mode := range []Mode{Compact, Verbose} {
		var c collector
		w := NewNetworkMessageWriter(WriterOptions{Sink: c.sink, HeaderMode: mode, NamespaceURIs: md.Namespaces})
		m := &MetaDataMessage{MessageID: "m1", PublisherID: "Plant1-Line4", DataSetWriterID: 101, WriterGroupName: "WG1",
			DataSetWriterName: "Temperatures", Timestamp: testTime, MetaData: md}
		if err := w.WriteMetaData(m); err != nil {
			t.Fatal(err)
		}
		st := &StatusMessage{MessageID: "s1", PublisherID: "Plant1-Line4", IsCyclic: false, Status: ua.PubSubStateError}
		if err := w.WriteStatus(st); err != nil {
			t.Fatal(err)
		}
		w.Release()
		if len(c.msgs) != 2 || !json.Valid(c.msgs[0]) || !json.Valid(c.msgs[1]) {
			t.Fatalf("%s", c.msgs)
		}
		t.Logf("%s: %s", mode, c.msgs[0])
		d := NewDecoder(DecoderOptions{NamespaceURIs: md.Namespaces})
		got, err := d.DecodeMetaDataMessage(c.msgs[0])
		if err != nil {
			t.Fatal(err)
		}
		if got.DataSetWriterID != 101 || got.WriterGroupName != "WG1" || got.Timestamp != testTime {
			t.Errorf("header %+v", got)
		}
		// Compare through the binary encoding: a lossless check of every member.
		if a, b := binaryOf(got.MetaData), binaryOf(md); !bytes.Equal(a, b) {
			t.Errorf("%s: metadata differs\n got  %+v\n want %+v", mode, got.MetaData, md)
		}
		gs, err := d.DecodeStatusMessage(c.msgs[1])
		if err != nil || *gs != *st {
			t.Errorf("%s: status %+v %v (%s)", mode, gs, err, c.msgs[1])
		}
	}
}

func binaryOf(s ua.Encodable) []byte {
	e := ua.NewEncoder(nil)
	s.Encode(e)
	return e.Bytes()
}

// TestWriterReset: a writer Reset for other options writes what a new
// writer with those options writes (gzip, a size bound, verbose headers and
// the samples format, one after the other, and after an error), and its
// generated MessageIds stay unique across Resets. TestResetAllocs: it keeps
// its buffer.
func TestWriterReset(t *testing.T) {
	names, dvs := benchFields(40)
	var c1, c2 collector
	optsFor := func(c *collector) []WriterOptions {
		return []WriterOptions{
			{Sink: c.sink, MaxMessageSize: 1500},
			{Sink: c.sink, Gzip: true, HeaderMode: Verbose},
			{Sink: c.sink, Format: FormatSamples, NamespaceURIs: []string{"urn:a", "urn:b"}},
			{Sink: c.sink},
		}
	}
	hdr := NetworkMessageHeader{MessageID: "id", PublisherID: "P", ContentMask: LayoutNetworkMessage}
	dsm := benchDSM(Compact)
	shared := NewNetworkMessageWriter(WriterOptions{Sink: func([]byte) error { return errors.New("sink down") }})
	if err := writeMessage(t, shared, hdr, []DataSetMessageHeader{dsm}, names, dvs); err == nil {
		t.Fatal("the failing sink's error was not reported")
	}
	for i, o := range optsFor(&c1) {
		shared.Reset(o)
		if err := writeMessage(t, shared, hdr, []DataSetMessageHeader{dsm}, names, dvs); err != nil {
			t.Fatalf("options %d, reset writer: %v", i, err)
		}
	}
	for i, o := range optsFor(&c2) {
		w := NewNetworkMessageWriter(o)
		if err := writeMessage(t, w, hdr, []DataSetMessageHeader{dsm}, names, dvs); err != nil {
			t.Fatalf("options %d, new writer: %v", i, err)
		}
		w.Release()
	}
	if len(c1.msgs) != len(c2.msgs) || len(c1.msgs) < 5 {
		t.Fatalf("%d messages from the reset writer, %d from new ones", len(c1.msgs), len(c2.msgs))
	}
	for i := range c1.msgs {
		if !bytes.Equal(c1.msgs[i], c2.msgs[i]) {
			t.Fatalf("message %d differs:\nreset: %q\nnew:   %q", i, c1.msgs[i], c2.msgs[i])
		}
	}

	// Generated ids go on across Resets.
	var c3 collector
	ids := map[string]bool{}
	for range 3 {
		shared.Reset(WriterOptions{Sink: c3.sink})
		if err := writeMessage(t, shared, NetworkMessageHeader{ContentMask: LayoutNetworkMessage}, []DataSetMessageHeader{dsm}, names[:2], dvs[:2]); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range c3.msgs {
		nm, err := testDecoder().DecodeNetworkMessage(m, nil)
		if err != nil {
			t.Fatal(err)
		}
		if nm.MessageID == "" || ids[nm.MessageID] {
			t.Fatalf("MessageId %q repeated or empty", nm.MessageID)
		}
		ids[nm.MessageID] = true
	}
	shared.Release()
}
