package uacp

import (
	"bytes"
	"errors"
	"testing"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/ua"
)

func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func TestAssemblerMessages(t *testing.T) {
	a := NewAssembler(1<<20, 16, nil)

	// One chunk.
	one := payload(300, 1)
	m, err := a.Add(1, ChunkFinal, one)
	if err != nil || m == nil || !bytes.Equal(m.Bytes(), one) || m.Chunks != 1 || m.RequestID != 1 || m.Len() != 300 {
		t.Fatalf("single chunk: %v %v", m, err)
	}
	one[0]++ // the message holds a copy
	if m.Bytes()[0] == one[0] {
		t.Fatal("message aliases the chunk body")
	}
	m.Release()

	// Two messages interleaved, each of several chunks, growing past a few size
	// classes.
	var want1, want2 []byte
	var m1, m2 *Message
	for i := range 16 {
		p1, p2 := payload(9000+i*1000, byte(i)), payload(100+i, byte(i+50))
		want1, want2 = append(want1, p1...), append(want2, p2...)
		ct := ChunkIntermediate
		if i == 15 {
			ct = ChunkFinal
		}
		if m1, err = a.Add(10, ct, p1); err != nil {
			t.Fatal(err)
		}
		if m2, err = a.Add(11, ct, p2); err != nil {
			t.Fatal(err)
		}
		if ct == ChunkIntermediate && (m1 != nil || m2 != nil || a.Pending() != 2) {
			t.Fatalf("chunk %d: message early, %d pending", i, a.Pending())
		}
	}
	if !bytes.Equal(m1.Bytes(), want1) || !bytes.Equal(m2.Bytes(), want2) || m1.Chunks != 16 || m2.Chunks != 16 {
		t.Fatalf("interleaved messages corrupt: %d/%d bytes, %d/%d chunks", m1.Len(), m2.Len(), m1.Chunks, m2.Chunks)
	}
	if a.Pending() != 0 {
		t.Fatalf("%d pending after both finished", a.Pending())
	}
	m1.Release()
	m2.Release()
	m2.Release() // harmless
}

func TestAssemblerAbortAndLimits(t *testing.T) {
	a := NewAssembler(10000, 3, nil)

	if _, err := a.Add(5, ChunkIntermediate, payload(100, 0)); err != nil {
		t.Fatal(err)
	}
	abort, _ := (&Error{Code: ua.StatusBadRequestTooLarge, Reason: "too big to send"}).AppendBinary(nil)
	_, err := a.Add(5, ChunkAbort, abort[HeaderSize:])
	var ae *AbortError
	if !errors.As(err, &ae) || ae.RequestID != 5 || ae.Code != ua.StatusBadRequestTooLarge || ae.Reason != "too big to send" {
		t.Fatalf("abort: %v", err)
	}
	if !errors.Is(err, ua.StatusBadRequestTooLarge) || a.Pending() != 0 {
		t.Fatalf("abort: %v, %d pending", err, a.Pending())
	}
	// A malformed abort body still aborts.
	if _, err := a.Add(6, ChunkAbort, []byte{1}); !errors.As(err, &ae) || ae.Code != ua.StatusBadDecodingError {
		t.Fatalf("malformed abort: %v", err)
	}

	// MaxChunkCount 3: the fourth chunk fails and the message is dropped.
	for i := range 3 {
		if _, err := a.Add(7, ChunkIntermediate, payload(10, 0)); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	if _, err := a.Add(7, ChunkFinal, payload(10, 0)); !errors.Is(err, ErrTooManyChunks) || !errors.Is(err, ua.StatusBadEncodingLimitsExceeded) {
		t.Fatalf("fourth chunk: %v", err)
	}
	if a.Pending() != 0 {
		t.Fatal("message over MaxChunkCount kept")
	}

	// MaxMessageSize 10000, in one chunk and over several.
	if _, err := a.Add(8, ChunkFinal, payload(10001, 0)); !errors.Is(err, ErrMessageTooLarge) || !errors.Is(err, ua.StatusBadTcpMessageTooLarge) {
		t.Fatalf("single oversized chunk: %v", err)
	}
	if m, err := a.Add(8, ChunkFinal, payload(10000, 0)); err != nil {
		t.Fatalf("exactly MaxMessageSize: %v", err)
	} else {
		m.Release()
	}
	a.Add(9, ChunkIntermediate, payload(6000, 0))
	if _, err := a.Add(9, ChunkFinal, payload(4001, 0)); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("oversized over two chunks: %v", err)
	}
	if a.Pending() != 0 {
		t.Fatal("oversized message kept")
	}

	if _, err := a.Add(1, 'Z', nil); !errors.Is(err, ErrHeaderInvalid) {
		t.Fatalf("chunk type Z: %v", err)
	}

	// At most MaxPendingMessages in progress.
	for i := range MaxPendingMessages {
		if _, err := a.Add(uint32(100+i), ChunkIntermediate, payload(1, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Add(999, ChunkIntermediate, payload(1, 0)); !errors.Is(err, ErrTooManyPending) {
		t.Fatalf("one message too many: %v", err)
	}
	a.Reset()
	if a.Pending() != 0 {
		t.Fatal("Reset left messages")
	}
}

func TestAssemblerClearsBuffers(t *testing.T) {
	pool := pooling.NewBufferPool(pooling.BufferPoolConfig{})
	a := NewAssembler(1<<20, 100, pool)
	secret := bytes.Repeat([]byte{0xAA}, 3000)
	m, err := a.Add(1, ChunkFinal, secret)
	if err != nil {
		t.Fatal(err)
	}
	m.Release()
	// The pool hands the same buffer back; what the message held is gone.
	b := pool.Get(3000)
	if bytes.Contains(b.B[:cap(b.B)], []byte{0xAA, 0xAA, 0xAA}) {
		t.Fatal("released message buffer still holds its bytes")
	}
	pool.Put(b)
}

func TestAssemblerAddChunk(t *testing.T) {
	testutil.CheckLeaks(t)
	client, server := pair(t, nil, nil)
	a := server.NewAssembler()
	want := chunk(MessageTypeMessage, ChunkFinal, 5000, 3)
	client.WriteChunk(want)
	ch, err := server.ReadChunk()
	if err != nil {
		t.Fatal(err)
	}
	// Zero copy: the message takes the chunk's buffer.
	data := ch.Data
	m, err := a.AddChunk(42, ch, 24, len(ch.Data)-16)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Bytes(), want[24:len(want)-16]) || &m.Bytes()[0] != &data[24] {
		t.Fatal("single-chunk message was copied or is wrong")
	}
	if ch.Data != nil {
		t.Fatal("chunk still holds the buffer the message took")
	}
	ch.Release() // harmless: it has nothing left

	// The next chunk gets a buffer of its own.
	client.WriteChunks([][]byte{chunk(MessageTypeMessage, ChunkIntermediate, 3000, 4), chunk(MessageTypeMessage, ChunkFinal, 2000, 5)})
	c1, err := server.ReadChunk()
	if err != nil {
		t.Fatal(err)
	}
	if &c1.Data[0] == &data[0] {
		t.Fatal("chunk reuses a buffer a message owns")
	}
	if !bytes.Equal(m.Bytes(), want[24:len(want)-16]) {
		t.Fatal("message changed by the next read")
	}
	m.Release()
	// Intermediate chunks are copied and stay with the Conn.
	if m, err := a.AddChunk(43, c1, HeaderSize, len(c1.Data)); m != nil || err != nil || c1.Data == nil {
		t.Fatalf("intermediate: %v %v", m, err)
	}
	part1 := append([]byte(nil), c1.Body()...)
	c2, err := server.ReadChunk()
	if err != nil {
		t.Fatal(err)
	}
	m, err = a.AddChunk(43, c2, HeaderSize, len(c2.Data))
	if err != nil || m.Chunks != 2 || !bytes.Equal(m.Bytes(), append(part1, c2.Body()...)) {
		t.Fatalf("two-chunk message: %v", err)
	}
	m.Release()
	if _, err := a.AddChunk(44, c2, 10, 5); !errors.Is(err, ErrHeaderInvalid) {
		t.Fatalf("bad range: %v", err)
	}
}

func TestAssemblerAllocs(t *testing.T) {
	a := NewAssembler(1<<20, 100, nil)
	p := payload(4000, 1)
	run := func() {
		for i := range 4 {
			if _, err := a.Add(1, ChunkIntermediate, p); err != nil {
				t.Fatal(i, err)
			}
		}
		m, err := a.Add(1, ChunkFinal, p)
		if err != nil {
			t.Fatal(err)
		}
		m.Release()
		m, _ = a.Add(2, ChunkFinal, p)
		m.Release()
	}
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Fatalf("%v allocations per message in steady state", n)
	}
}
