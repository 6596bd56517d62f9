package jsonenc

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/uagate/gateway/uastack/ua"
)

// TestStream10MBValue streams NetworkMessages whose one field is a single 10 MB
// value (a Double array, a String array, one String, one ByteString, a matrix):
// the writer flushes inside the value (at element boundaries, or between pieces
// of a long string), so the buffer stays within 32 KiB, and the output is
// byte-identical to an in-memory encode.
func TestStream10MBValue(t *testing.T) {
	size := 10 << 20
	if raceEnabled {
		size = 2 << 20 // the race detector slows encoding tenfold; still well past 32 KiB
	}
	doubles := make([]float64, size/20&^3) // a multiple of 4, for the matrix
	for i := range doubles {
		doubles[i] = float64(i) * 1.000001
	}
	strs := make([]string, size/20)
	for i := range strs {
		strs[i] = "value-" + strings.Repeat("x", i%20)
	}
	// A long string with escapes and multi-byte runes, so that pieces are cut
	// near runes and escape sequences.
	long := strings.Repeat("abc\"é€😀\n\x01", size/20)
	bin := make([]byte, size*3/4)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	m, err := ua.NewMatrixVariant(doubles, []int32{int32(len(doubles) / 4), 4})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		v    ua.Variant
	}{
		{"Double[]", ua.MustVariant(doubles)},
		{"String[]", ua.MustVariant(strs)},
		{"String", ua.NewStringVariant(long)},
		{"ByteString", ua.MustVariant(bin)},
		{"Matrix", m},
		{"NaN Double[]", ua.MustVariant([]float64{math.NaN(), 1})},
	}
	for _, mode := range []Mode{Compact, Verbose} {
		for _, c := range cases {
			dv := ua.DataValue{Value: c.v, SourceTimestamp: testTime}
			var out bytes.Buffer
			ws := NewNetworkMessageWriter(WriterOptions{Writer: &out})
			dsm := benchDSM(mode)
			err := writeMessage(t, ws, benchHeader, []DataSetMessageHeader{dsm}, []string{"big"}, []ua.DataValue{dv})
			peak := ws.PeakBuffered()
			ws.Release()
			if err != nil {
				t.Fatalf("%s %s: %v", mode, c.name, err)
			}
			var mem collector
			w := NewNetworkMessageWriter(WriterOptions{Sink: mem.sink})
			if err := writeMessage(t, w, benchHeader, []DataSetMessageHeader{dsm}, []string{"big"}, []ua.DataValue{dv}); err != nil {
				t.Fatal(err)
			}
			w.Release()
			t.Logf("%s %s: streamed %d bytes, peak buffer %d bytes", mode, c.name, out.Len(), peak)
			if !bytes.Equal(out.Bytes(), mem.msgs[0]) {
				t.Errorf("%s %s: streamed output differs from the in-memory encode", mode, c.name)
			}
			if out.Len() > 1<<20 && peak > 32<<10 {
				t.Errorf("%s %s: peak buffer %d bytes for a %d-byte message, want ≤ 32 KiB", mode, c.name, peak, out.Len())
			}
		}
	}
}
