package storelog

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"
)

// The engine evaluation behind the log's design (doc.go): the two candidate
// engines doing the log's work at the gateway's message sizes. One op is one
// message appended (commits of engineBatch messages), read back once by one
// consumer through its cursor, the cursor moved, and the head removed as the
// consumer passes it. cpu-ns/op is the process's CPU time (user + system,
// every goroutine: the in-process NATS server's too) per message.
//
//	go test -run '^$' -bench Engine -benchtime 2000x ./bridge/storelog/

const engineBatch = 16

var engineSizes = []int{1 << 10, 16 << 10, 128 << 10}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// written is what the process wrote so far (/proc/self/io's wchar: files
// and sockets); -1 where it cannot be read.
func written() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "wchar:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// measure runs body b.N times with CPU time and the bytes the process
// wrote (the log's file: its write amplification) reported per op.
func measure(b *testing.B, size int, body func(payload []byte)) {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu, w := cpuTime(), written()
	b.ResetTimer()
	body(payload)
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	if w2 := written(); w >= 0 && w2 >= 0 {
		b.ReportMetric(float64(w2-w)/float64(b.N), "written-B/op")
	}
}

// BenchmarkEngineJetStream: an in-process nats-server with JetStream (no
// listener; nats.go over its in-process connection), a file-storage stream
// with limits retention, asynchronous publishes awaited per batch, a durable
// pull consumer acknowledging each batch (AckAll). JetStream has no fsync
// per batch: sync_always fsyncs every message, the default every 2 minutes.
func BenchmarkEngineJetStream(b *testing.B) {
	for _, size := range engineSizes {
		for _, always := range []bool{false, true} {
			b.Run(fmt.Sprintf("%dKiB/syncAlways=%v", size>>10, always), func(b *testing.B) {
				benchJetStream(b, size, always)
			})
		}
	}
}

func benchJetStream(b *testing.B, size int, syncAlways bool) {
	dir := b.TempDir()
	s, err := server.NewServer(&server.Options{DontListen: true, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true, SyncAlways: syncAlways,
		JetStreamMaxStore: 8 << 30, MaxPayload: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	go s.Start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	if !s.ReadyForConnections(10 * time.Second) {
		b.Fatal("not ready")
	}
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LOG", Subjects: []string{"log.>"}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, MaxBytes: 1 << 30, Discard: jetstream.DiscardOld})
	if err != nil {
		b.Fatal(err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "sink", AckPolicy: jetstream.AckAllPolicy})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, size)
	measure(b, size, func(payload []byte) {
		for done := 0; done < b.N; {
			n := min(engineBatch, b.N-done)
			for range n {
				if _, err := js.PublishAsync("log.g", payload); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(10 * time.Second):
				b.Fatal("publish acks")
			}
			batch, err := cons.Fetch(n, jetstream.FetchMaxWait(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			var last jetstream.Msg
			got := 0
			for m := range batch.Messages() {
				buf = append(buf[:0], m.Data()...)
				last = m
				got++
			}
			if got != n {
				b.Fatalf("fetched %d of %d: %v", got, n, batch.Error())
			}
			if err := last.Ack(); err != nil {
				b.Fatal(err)
			}
			done += n
		}
	})
}

// BenchmarkEngineBolt: bbolt, one file; a bucket of messages keyed by their
// big-endian sequence number, one write transaction per batch (the batch's
// messages, the cursor moved by the previous read, the head deleted up to
// it; fsync per commit unless noSync), the consumer reading with a cursor
// in a read transaction and copying each message out.
func BenchmarkEngineBolt(b *testing.B) {
	for _, size := range engineSizes {
		for _, noSync := range []bool{false, true} {
			b.Run(fmt.Sprintf("%dKiB/noSync=%v", size>>10, noSync), func(b *testing.B) {
				benchBolt(b, size, noSync)
			})
		}
	}
}

func benchBolt(b *testing.B, size int, noSync bool) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "log.db"), 0o600, &bolt.Options{
		FreelistType: bolt.FreelistMapType, NoFreelistSync: true, NoSync: noSync, Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	msgs, cursors := []byte("m"), []byte("c")
	if err := db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(msgs); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(cursors)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	var key [8]byte
	var next, read, deleted uint64 = 1, 0, 0
	buf := make([]byte, 0, size)
	measure(b, size, func(payload []byte) {
		for done := 0; done < b.N; {
			n := min(engineBatch, b.N-done)
			err := db.Update(func(tx *bolt.Tx) error {
				mb := tx.Bucket(msgs)
				for range n {
					binary.BigEndian.PutUint64(key[:], next)
					next++
					if err := mb.Put(key[:], payload); err != nil {
						return err
					}
				}
				binary.BigEndian.PutUint64(key[:], read)
				if err := tx.Bucket(cursors).Put([]byte("sink"), key[:]); err != nil {
					return err
				}
				for ; deleted < read; deleted++ {
					binary.BigEndian.PutUint64(key[:], deleted+1)
					if err := mb.Delete(key[:]); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			err = db.View(func(tx *bolt.Tx) error {
				c := tx.Bucket(msgs).Cursor()
				binary.BigEndian.PutUint64(key[:], read+1)
				got := 0
				for k, v := c.Seek(key[:]); k != nil && got < n; k, v = c.Next() {
					buf = append(buf[:0], v...)
					read = binary.BigEndian.Uint64(k)
					got++
				}
				if got != n {
					return fmt.Errorf("read %d of %d", got, n)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			done += n
		}
	})
}
