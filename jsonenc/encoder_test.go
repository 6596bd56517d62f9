package jsonenc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/uagate/gateway/uastack/ua"
)

// TestFlushIdentical: streaming with flushes at 16 KiB gives byte-identical
// output to an in-memory encode, and the buffer stays bounded.
func TestFlushIdentical(t *testing.T) {
	names, dvs := benchFields(2000)
	for _, mode := range allModes {
		var mem collector
		w := NewNetworkMessageWriter(WriterOptions{Sink: mem.sink})
		if err := encodeBenchMessage(w, mode, names, dvs); err != nil {
			t.Fatal(err)
		}
		w.Release()
		var out bytes.Buffer
		ws := NewNetworkMessageWriter(WriterOptions{Writer: &out})
		if err := encodeBenchMessage(ws, mode, names, dvs); err != nil {
			t.Fatal(err)
		}
		peak := ws.PeakBuffered()
		ws.Release()
		if !bytes.Equal(out.Bytes(), mem.msgs[0]) {
			t.Fatalf("%s: streamed output differs", mode)
		}
		if peak > 32<<10 {
			t.Errorf("%s: peak buffer %d", mode, peak)
		}
	}
}

// TestStream10MB streams a 10 MB NetworkMessage and checks that the buffer
// never holds more than 32 KiB.
func TestStream10MB(t *testing.T) {
	names, dvs := benchFields(1000)
	cw := &countWriter{}
	w := NewNetworkMessageWriter(WriterOptions{Writer: cw})
	defer w.Release()
	hdr := benchHeader
	dsm := benchDSM(Verbose)
	w.Begin(&hdr)
	w.BeginDataSetMessage(&dsm)
	for i := 0; cw.n < 10<<20; i++ {
		if err := w.AddField(names[i%len(names)]+"_"+string(rune('a'+i/1000%26)), &dvs[i%len(dvs)]); err != nil {
			t.Fatal(err)
		}
	}
	w.EndDataSetMessage()
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	t.Logf("streamed %d bytes, peak buffer %d bytes", cw.n, w.PeakBuffered())
	if w.PeakBuffered() > 32<<10 {
		t.Fatalf("peak buffer %d > 32 KiB", w.PeakBuffered())
	}
}

func TestEncoderErrors(t *testing.T) {
	e := NewEncoder(nil, Options{MaxDepth: 3})
	defer e.Release()
	for i := 0; i < 5; i++ {
		e.StartArray()
	}
	if !errors.Is(e.Err(), ErrTooDeep) {
		t.Fatalf("got %v", e.Err())
	}
	e.Reset(nil, Options{})
	e.StartObject()
	e.EndArray()
	if !errors.Is(e.Err(), ErrUnbalanced) {
		t.Fatalf("got %v", e.Err())
	}
	// A cyclic DiagnosticInfo stops at MaxDepth instead of recursing forever.
	di := &ua.DiagnosticInfo{}
	di.InnerDiagnosticInfo = di
	e.Reset(nil, Options{})
	e.WriteDiagnosticInfo(di)
	if !errors.Is(e.Err(), ErrTooDeep) {
		t.Fatalf("cycle: %v", e.Err())
	}
	// Writer errors are sticky and reported.
	e.Reset(failWriter{}, Options{FlushThreshold: 1})
	e.StartArray()
	e.WriteString("x")
	e.StartArray()
	if e.Err() == nil || e.Flush() == nil {
		t.Fatal("write error not reported")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("boom") }

// TestScrub: released buffers hold no trace of what was written.
func TestScrub(t *testing.T) {
	e := NewEncoder(nil, Options{})
	e.WriteString(strings.Repeat("secret", 5000)) // grows the buffer several times
	b := e.Bytes()
	full := b[:cap(b)]
	e.Release()
	if bytes.Contains(full, []byte("secret")) {
		t.Fatal("buffer not scrubbed on Release")
	}
}

func TestRollback(t *testing.T) {
	e := NewEncoder(nil, Options{})
	defer e.Release()
	e.StartArray()
	e.WriteInt32(1)
	cp := e.Checkpoint()
	e.WriteInt32(2)
	e.StartObject()
	if err := e.Rollback(cp); err != nil {
		t.Fatal(err)
	}
	e.WriteInt32(3)
	e.EndArray()
	if got := string(e.Bytes()); got != "[1,3]" || !json.Valid(e.Bytes()) {
		t.Fatalf("got %s", got)
	}
}

func TestAppend(t *testing.T) {
	v := ua.NewInt32Variant(42)
	got, err := AppendVariant([]byte("x="), &v, Options{Mode: Reversible104})
	if err != nil || string(got) != `x={"Type":6,"Body":42}` {
		t.Fatalf("%s %v", got, err)
	}
	got, err = AppendDataValue(nil, &ua.DataValue{Value: v, Status: ua.StatusBadNoData}, Options{Mode: Verbose})
	if err != nil || string(got) != `{"UaType":6,"Value":42,"Status":{"Code":2157641728,"Symbol":"BadNoData"}}` {
		t.Fatalf("%s %v", got, err)
	}
}
