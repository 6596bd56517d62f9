package jsonenc

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

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

// appendEscapedBytewise is appendEscaped without the 8-byte fast path: the
// reference it must agree with.
func appendEscapedBytewise(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safeASCII[c] {
				b = append(b, c)
			} else {
				b = appendEscapedByte(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xF])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}

// TestAppendEscapedFast: the 8-bytes-at-once path escapes exactly as the
// byte loop does — every byte value at every position of strings around
// the word size, runs of unsafe bytes, UTF-8 (valid, invalid, U+2028) — and
// the result is valid JSON that decodes to the input's valid UTF-8.
func TestAppendEscapedFast(t *testing.T) {
	check := func(s string) {
		t.Helper()
		got, want := appendEscaped(nil, s), appendEscapedBytewise(nil, s)
		if !bytes.Equal(got, want) {
			t.Fatalf("appendEscaped(%q) = %q, want %q", s, got, want)
		}
	}
	for n := 1; n <= 17; n++ {
		for pos := range n {
			for c := range 256 {
				b := bytes.Repeat([]byte{'a'}, n)
				b[pos] = byte(c)
				check(string(b))
				b[n-1-pos] = byte(255 - c)
				check(string(b))
			}
		}
	}
	for _, s := range []string{"", "Field00001", "plain ascii names of some length", "tab\there", "quote\"quote\"", `back\slash\\`,
		"\x00\x01\x02\x03\x04\x05\x06\x07\x08", "\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f", "ünïcödé names ✓ — 温度", "line\u2028sep\u2029x",
		"bad \xff\xfe utf-8 \xc3", "0123456\x1f89abcdef", "01234567\"9abcdef", "~~~~~~~~}}}}}}}}"} {
		check(s)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rnd.IntN(40))
		for i := range b {
			switch rnd.IntN(4) {
			case 0:
				b[i] = byte(rnd.IntN(256))
			default:
				b[i] = byte(0x20 + rnd.IntN(0x5f))
			}
		}
		check(string(b))
	}
}

// TestEncoderDiscard: Discard scrubs the buffer as Release does (it may
// hold secrets) and gives the Encoder back; a new Encoder works as ever.
func TestEncoderDiscard(t *testing.T) {
	e := NewEncoder(nil, Options{})
	e.StartObject()
	e.FieldString("secret", strings.Repeat("s", 100<<10))
	e.EndObject()
	if e.Err() != nil {
		t.Fatal(e.Err())
	}
	b := e.Bytes()
	e.Discard()
	for i, c := range b {
		if c != 0 {
			t.Fatalf("byte %d is %q after Discard, want the buffer scrubbed", i, c)
		}
	}
	e2 := NewEncoder(nil, Options{})
	defer e2.Release()
	e2.StartObject()
	e2.FieldString("a", "b")
	e2.EndObject()
	if got := string(e2.Bytes()); got != `{"a":"b"}` {
		t.Fatalf("after a Discard: %s", got)
	}
}
