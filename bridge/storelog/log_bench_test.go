package storelog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sinktest"
)

// chanSettled counts settlements on a channel: the benchmark's producer
// keeps a bounded number of messages unsettled.
type chanSettled chan bool

func (c chanSettled) Settled(_ uint64, delivered bool) { c <- delivered }

// BenchmarkLog streams messages through the log: one op is a message
// enqueued on a stream, committed (fdatasync per commit unless noSync),
// settled upstream, read by one consumer from the stream's tail and
// settled by it, its record deleted. Up to 64 messages are unsettled
// upstream at a time (a writer group's maxUnacked).
//
// The layouts: the log's (pages of 32 KiB, records in parts of 7.5 KiB) and
// whole records in 4 KiB pages (bbolt then allocates the pages of every
// large record at each commit: the garbage the layout avoids).
func BenchmarkLog(b *testing.B) {
	for _, size := range []int{1 << 10, 100 << 10} {
		for _, noSync := range []bool{false, true} {
			for _, layout := range []struct {
				name       string
				page, part int
			}{{"parts", 0, 0}, {"whole", 4 << 10, 1 << 30}} {
				b.Run(fmt.Sprintf("%dKiB/noSync=%v/%s", size>>10, noSync, layout.name), func(b *testing.B) {
					benchLog(b, size, noSync, layout.page, layout.part)
				})
			}
		}
	}
}

func benchLog(b *testing.B, size int, noSync bool, page, part int) {
	l, err := Open(Options{Dir: b.TempDir(), NoSync: noSync, Publisher: "pub", pageSize: page, partSize: part})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	s, _ := l.Stream("g")
	q := &testQueue{name: "q", guarantee: config.AtLeastOnce, auto: true, discard: true}
	r, err := s.NewReader("q", q, ReaderOptions{})
	if err != nil {
		b.Fatal(err)
	}
	r.Start()
	payload := make([]byte, size)
	up := make(chanSettled, 1024)
	measure(b, size, func([]byte) {
		out := 0
		for i := range b.N {
			m := sink.NewMessage(size)
			m.SetPayload(payload)
			m.Kind, m.Addr = sink.KindData, sink.Addr{Publisher: "pub", Group: "g", Writer: "w"}
			m.Tracker, m.Token = up, uint64(i)
			s.Enqueue(m)
			out++
			for out > 64 {
				<-up
				out--
			}
		}
		for ; out > 0; out-- {
			<-up
		}
		deadline := time.Now().Add(10 * time.Second)
		for r.Stats().Acked < uint64(b.N) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	})
}

// nullSink confirms every message as it takes it (at-least-once).
type nullSink struct{}

func (nullSink) Name() string                                  { return "null" }
func (nullSink) Guarantee() config.Guarantee                   { return config.AtLeastOnce }
func (nullSink) Connect(context.Context) error                 { return nil }
func (nullSink) Close(context.Context) error                   { return nil }
func (nullSink) Publish(m *sink.Message, ack sink.Acker) error { ack.Confirmed(m, nil); return nil }

// BenchmarkLogResponse is the log at an ordinary rate: one op is a publish
// response's worth of messages (10 of 12 KiB, one token, handed over whole,
// as node-opcua's 10,000 changes/s arrive: ~11 responses a second),
// committed with an fdatasync, settled upstream, read by a sink's Output
// (its own goroutine, as in the gateway) and settled there. The producer
// waits for each response to be settled upstream before the next, as a
// writer group does between publish responses at that rate. cpu-ns/op is
// the process's CPU per response (the goroutine hand-offs are not counted
// apart: gateway bench's bridge_wakeups_per_s does that).
func BenchmarkLogResponse(b *testing.B) {
	const perResponse, size = 10, 12 << 10
	l, err := Open(Options{Dir: b.TempDir(), Publisher: "pub"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	s, _ := l.Stream("g")
	out := sinktest.StartOutput(b, nullSink{}, sink.OutputOptions{Guarantee: config.AtLeastOnce})
	r, err := s.NewReader("null", out, ReaderOptions{})
	if err != nil {
		b.Fatal(err)
	}
	r.Start()
	defer r.Close(context.Background())
	up := make(chanSettled, perResponse)
	measure(b, size, func(payload []byte) {
		for i := range b.N {
			tok := uint64(i + 1)
			for range perResponse {
				m := sink.NewMessage(size)
				m.SetPayload(payload)
				m.Kind, m.Addr = sink.KindData, sink.Addr{Publisher: "pub", Group: "g", Writer: "w"}
				m.Tracker, m.Token = up, tok
				s.Enqueue(m)
			}
			s.Handed(tok)
			for range perResponse {
				<-up
			}
		}
		want := uint64(b.N * perResponse)
		deadline := time.Now().Add(10 * time.Second)
		for r.Stats().Acked < want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	})
}

// BenchmarkPlatformSync is what the machine charges for the log's work
// without the log: one op writes a publish response's bytes (120 KiB) to a
// file and fdatasyncs it, or only sleeps, with a pause of 90 ms between ops
// (node-opcua's ~11 responses a second) or none. On a virtual machine a
// thread that sleeps and wakes again costs far more CPU than on bare
// metal, and the log's fdatasyncs are such sleeps; cpu-ns/op (the
// process's CPU, every thread's: the Go runtime's monitor thread polls
// while a goroutine waits in a system call) tells what of a commit's cost
// is the machine's, to set beside BenchmarkLogResponse.
//
//	go test -run '^$' -bench PlatformSync -benchtime 50x ./bridge/storelog/
func BenchmarkPlatformSync(b *testing.B) {
	const size = 120 << 10
	for _, c := range []struct {
		name        string
		write, sync bool
		pause       time.Duration
	}{
		{"write+fdatasync", true, true, 0},
		{"write+fdatasync/pause=90ms", true, true, 90 * time.Millisecond},
		{"write/pause=90ms", true, false, 90 * time.Millisecond},
		{"pause=90ms", false, false, 90 * time.Millisecond},
	} {
		b.Run(c.name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "f"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			measure(b, size, func(payload []byte) {
				for i := range b.N {
					if c.write {
						if _, err := f.WriteAt(payload, int64(i%64)*size); err != nil {
							b.Fatal(err)
						}
					}
					if c.sync {
						if err := syscall.Fdatasync(int(f.Fd())); err != nil {
							b.Fatal(err)
						}
					}
					if c.pause > 0 {
						time.Sleep(c.pause)
					}
				}
			})
		})
	}
}
