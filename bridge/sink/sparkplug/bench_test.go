package sparkplug

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/uagate/gateway/bridge/storelog"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/ua"
)

// benchValues are n Doubles with both timestamps, every 10th Uncertain and
// every 50th Bad: the values BenchmarkEncodeNetworkMessage1000 of jsonenc
// encodes.
func benchValues(n int) ([]string, []ua.DataValue) {
	names := make([]string, n)
	dvs := make([]ua.DataValue, n)
	t0 := ua.NewDateTime(time.Date(2024, 5, 1, 10, 15, 30, 123456700, time.UTC))
	for i := range dvs {
		names[i] = "Field" + strconv.Itoa(i)
		dvs[i].Value.SetDouble(float64(i)*1.25 + 0.1)
		if i%50 == 0 {
			dvs[i].Status = ua.StatusBadSensorFailure
		} else if i%10 == 0 {
			dvs[i].Status = ua.StatusUncertainLastUsableValue
		}
		dvs[i].SourceTimestamp = t0 + ua.DateTime(i)*10_000
		dvs[i].ServerTimestamp = dvs[i].SourceTimestamp + 1234
	}
	return names, dvs
}

// encodeDDATA is the DDATA of a writer with values, as the feed writes it.
func encodeDDATA(e *encoder, b []byte, now uint64, values []ua.DataValue) []byte {
	b = beginPayload(b, now)
	var m metric
	m.hasAlias = true
	for i := range values {
		m.alias, m.ts = uint64(i+1), valueTime(&values[i], now)
		b, _ = e.appendMetric(b, &m, &values[i], Double)
	}
	return b
}

// BenchmarkEncode: one message of 1000 values of a writer, as Sparkplug B
// DDATA (protowire, aliases, source timestamps, Quality and StatusCode
// properties on the 30 non-Good values; sparkplug-feed: the node's
// ValueSink, from the writer group's batch to the pooled message on the
// queue) and, in the same run, as the Part 14 NetworkMessage jsonenc
// writes for them (compact, one DataSetMessage,
// fields as DataValues with status and timestamps, and as Variants, the
// gateway's default). ns/op ÷ 1000 is the cost per metric; B/op and
// allocs/op must be 0.
func BenchmarkEncode(b *testing.B) {
	names, dvs := benchValues(1000)
	now := uint64(time.Now().UnixMilli())
	b.Run("sparkplug-ddata", func(b *testing.B) {
		var e encoder
		buf := encodeDDATA(&e, nil, now, dvs)
		b.SetBytes(int64(len(buf) - headerRoom))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			buf = encodeDDATA(&e, buf, now, dvs)
		}
	})
	b.Run("sparkplug-feed", func(b *testing.B) {
		_, f, batch, q := feedFixture(b, 1000)
		f.Values(batch)
		b.SetBytes(int64(q.bytes))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			f.Values(batch)
		}
	})
	for _, c := range []struct {
		name  string
		field jsonenc.DataSetMessageContentMask
		mask  jsonenc.DataSetFieldContentMask
	}{
		{"part14-datavalue", jsonenc.FieldEncodingBits(jsonenc.Compact), jsonenc.FieldMaskStatusCode | jsonenc.FieldMaskSourceTimestamp | jsonenc.FieldMaskServerTimestamp},
		{"part14-variant", jsonenc.FieldEncodingBits(jsonenc.Compact), 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			size := 0
			w := jsonenc.NewNetworkMessageWriter(jsonenc.WriterOptions{Sink: func(msg []byte) error { size = len(msg); return nil }})
			defer w.Release()
			hdr := jsonenc.NetworkMessageHeader{
				MessageID: "32235546-05d9-4fd7-97df-ea3ff3408574", PublisherID: "Plant1-Line4", WriterGroupName: "WG1",
				ContentMask: jsonenc.LayoutNetworkMessage | jsonenc.NMSingleDataSetMessage | jsonenc.NMWriterGroupName,
			}
			dsm := jsonenc.DataSetMessageHeader{
				DataSetWriterID: 101, SequenceNumber: 4711, Timestamp: dvs[0].SourceTimestamp, Type: jsonenc.DeltaFrame,
				ContentMask:      jsonenc.DSMDataSetWriterID | jsonenc.DSMSequenceNumber | jsonenc.DSMTimestamp | jsonenc.DSMMessageType | c.field,
				FieldContentMask: c.mask,
			}
			encode := func() {
				if err := w.Begin(&hdr); err != nil {
					b.Fatal(err)
				}
				if err := w.BeginDataSetMessage(&dsm); err != nil {
					b.Fatal(err)
				}
				for i := range dvs {
					if err := w.AddField(names[i], &dvs[i]); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.EndDataSetMessage(); err != nil {
					b.Fatal(err)
				}
				if err := w.End(); err != nil {
					b.Fatal(err)
				}
			}
			encode()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				encode()
			}
		})
	}
}

// BenchmarkHold: what a node that is not online does with a writer's DDATA
// of 1000 values (the feed's, as in BenchmarkEncode): memstore copies it
// into the MemStore (16 MiB, full: the oldest dropped); named is the
// naming of its metrics alone (appendNamed, what a durable store gets);
// logstore names them and appends the record to the store-and-forward log
// (LogStore: a give-way stream of a log of 16 MiB, full: the oldest
// dropped), fdatasync per commit as the gateway runs it, or none
// (logstore-nosync): a hold waits while the stream's pending messages are
// at their bound, so these measure the log's append rate, the committer's
// allocations included in B/op and allocs/op.
func BenchmarkHold(b *testing.B) {
	for _, c := range []string{"memstore", "named", "logstore", "logstore-nosync"} {
		b.Run(c, func(b *testing.B) {
			node, f, batch, q := feedFixture(b, 1000)
			if c == "logstore" || c == "logstore-nosync" {
				l, err := storelog.Open(storelog.Options{Dir: b.TempDir(), MaxBytes: 16 << 20, NoSync: c == "logstore-nosync",
					Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				s, err := NewLogStore(l, "bench")
				if err != nil {
					b.Fatal(err)
				}
				node.cfg.Store, node.durable = s, true
			}
			q.keep = true
			f.Values(batch)
			d := node.devs[0]
			version := d.metrics.Load().version
			p := body(q.last)
			hold := func() {
				node.pubMu.Lock()
				node.hold(d, version, batch.Created, p)
				node.pubMu.Unlock()
			}
			if c == "named" {
				dm := d.metrics.Load()
				hold = func() { node.named, _, _ = appendNamed(node.named[:0], p, dm) }
			}
			for range 1000 { // the stores full
				hold()
			}
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				hold()
			}
			b.StopTimer()
			if st := node.cfg.Store.Stats(); c != "named" && (st.Messages == 0 || st.Dropped == 0) {
				b.Fatalf("store %+v: want it full", st)
			}
		})
	}
}
