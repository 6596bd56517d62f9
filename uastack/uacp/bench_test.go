package uacp

import (
	"fmt"
	"net"
	"sync"
	"testing"

	gouacp "github.com/gopcua/opcua/uacp"
)

// repeatConn is a net.Conn whose reads repeat a stream forever, to measure
// ReadChunk without the network.
type repeatConn struct {
	memConn
	stream []byte
	off    int
}

func (c *repeatConn) Read(p []byte) (int, error) {
	n := copy(p, c.stream[c.off:])
	c.off = (c.off + n) % len(c.stream)
	return n, nil
}

// batch is a run of chunks of one size, enough to fill several TCP segments.
func batch(size int) []byte {
	n := max(1, 256<<10/size)
	var b []byte
	for i := range n {
		b = append(b, chunk(MessageTypeMessage, ChunkFinal, size, byte(i))...)
	}
	return b
}

var benchSizes = []int{256, 4096, 65535}

// BenchmarkReadChunk reads chunks of several sizes from memory and from loopback
// TCP, and compares with gopcua's uacp.Conn.Receive (a new 64 KiB buffer per
// chunk) on the same stream. Target: 0 allocs/op for ReadChunk.
func BenchmarkReadChunk(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("mem/%d", size), func(b *testing.B) {
			cfg, _ := (*Config)(nil).withDefaults()
			c := newConn(&repeatConn{stream: batch(size)}, &cfg)
			c.limits = Limits{ReceiveBufferSize: DefaultBufferSize, SendBufferSize: DefaultBufferSize}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.ReadChunk(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("tcp/%d", size), func(b *testing.B) {
			client, server, stop := benchPair(b, batch(size))
			defer stop()
			_ = client
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := server.ReadChunk(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("tcp-gopcua/%d", size), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			raw, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			nc, err := ln.Accept()
			if err != nil {
				b.Fatal(err)
			}
			stop := feed(raw, batch(size))
			defer stop()
			defer nc.Close()
			gc, err := gouacp.NewConn(nc.(*net.TCPConn), &gouacp.Acknowledge{ReceiveBufSize: DefaultBufferSize, SendBufSize: DefaultBufferSize})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := gc.Receive(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchPair returns a connected pair whose client side writes stream over and over
// until stop is called.
func benchPair(b *testing.B, stream []byte) (client, server *Conn, stop func()) {
	l, err := Listen("127.0.0.1:0", nil)
	if err != nil {
		b.Fatal(err)
	}
	client, err = Dial(b.Context(), "opc.tcp://"+l.Addr().String(), nil)
	if err != nil {
		b.Fatal(err)
	}
	server, err = l.Accept(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	l.Close()
	stopFeed := feed(client.nc, stream)
	return client, server, func() {
		server.Close()
		client.Close()
		stopFeed()
	}
}

// feed writes stream to nc until nc fails; the returned stop closes nc and waits.
func feed(nc net.Conn, stream []byte) (stop func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if _, err := nc.Write(stream); err != nil {
				return
			}
		}
	}()
	return func() {
		nc.Close()
		wg.Wait()
	}
}

// BenchmarkAssemble measures reassembly: messages of one chunk taking over the
// chunk buffer, and messages of four chunks copied into a pooled buffer.
func BenchmarkAssemble(b *testing.B) {
	b.Run("single/zero-copy", func(b *testing.B) {
		cfg, _ := (*Config)(nil).withDefaults()
		c := newConn(&repeatConn{stream: batch(4096)}, &cfg)
		c.limits = Limits{ReceiveBufferSize: DefaultBufferSize, SendBufferSize: DefaultBufferSize}
		a := NewAssembler(0, 0, nil)
		b.SetBytes(4096)
		b.ReportAllocs()
		for b.Loop() {
			ch, err := c.ReadChunk()
			if err != nil {
				b.Fatal(err)
			}
			m, err := a.AddChunk(1, ch, 24, len(ch.Data))
			if err != nil {
				b.Fatal(err)
			}
			m.Release()
		}
	})
	b.Run("4-chunks/copy", func(b *testing.B) {
		a := NewAssembler(0, 0, nil)
		p := payload(16000, 1)
		b.SetBytes(4 * 16000)
		b.ReportAllocs()
		for b.Loop() {
			for range 3 {
				if _, err := a.Add(1, ChunkIntermediate, p); err != nil {
					b.Fatal(err)
				}
			}
			m, err := a.Add(1, ChunkFinal, p)
			if err != nil {
				b.Fatal(err)
			}
			m.Release()
		}
	})
}
