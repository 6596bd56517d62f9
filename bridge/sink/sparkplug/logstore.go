package sparkplug

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/storelog"
)

// StreamPrefix begins the names of the Sparkplug sinks' streams in the
// store-and-forward log: a writer group's name has no '/', so the two
// never meet.
const StreamPrefix = "sparkplug/"

// StreamName is the log stream of the Sparkplug sink named sinkName.
func StreamName(sinkName string) string { return StreamPrefix + sinkName }

// logConsumer is the name of a LogStore's cursor in its stream.
const logConsumer = "node"

// syncWait bounds how long Drain waits for the records put last to be
// committed before it reads the stream.
const syncWait = 5 * time.Second

// LogStore is a Store on a stream of the store-and-forward log
// (bridge/storelog), StreamName of the sink: what the node holds survives
// a crash or a restart of the process, and is bounded by the log's
// maxBytes and maxAge instead of memory. The stream gives way
// (storelog.StreamOptions): a Put never waits for room, and when the log
// is full the oldest held records are dropped (counted here and in the
// log's stats) — for the node's data and for the writer groups', which
// never wait for it. Its records are named (Record.Named): the device's
// id is the record's writer name, the payload the DDATA body with metric
// names and datatypes. Drain reads them through a pull reader whose
// durable cursor moves past each record once it was sent: a crash during
// a drain sends again, after the next birth, at most what went out since
// the log's last commit.
type LogStore struct {
	s *storelog.Stream
	r *storelog.Reader

	// puts counts the records handed to the stream, settled those it
	// committed (or refused: undelivered); a Drain waits for the two to
	// meet (committed, cap 1, wakes it).
	puts, settled, undelivered, refused atomic.Uint64
	committed                           chan struct{}
}

// NewLogStore opens the stream of Sparkplug sink sinkName in l, with what
// an earlier process left in it.
func NewLogStore(l *storelog.Log, sinkName string) (*LogStore, error) {
	s, err := l.OpenStream(StreamName(sinkName), storelog.StreamOptions{GiveWay: true})
	if err != nil {
		return nil, fmt.Errorf("sparkplug %s: %w", sinkName, err)
	}
	r, err := s.NewPullReader(logConsumer)
	if err != nil {
		return nil, fmt.Errorf("sparkplug %s: %w", sinkName, err)
	}
	return &LogStore{s: s, r: r, committed: make(chan struct{}, 1)}, nil
}

// Put implements Store: it appends r at the log's next commit. Only named
// records are taken (the node names them for a durable store).
func (ls *LogStore) Put(r Record) bool {
	if !r.Named {
		ls.refused.Add(1)
		return false
	}
	m := sink.NewMessage(len(r.Payload))
	m.SetPayload(r.Payload)
	m.Kind = sink.KindData
	m.Addr.Writer = r.Device
	m.Created = r.Created
	m.Tracker = ls // Token 0: not an OPC UA sequence number for the stream
	ls.puts.Add(1)
	ls.s.Enqueue(m)
	return true
}

// Settled implements sink.Tracker for the records put: the log committed
// one (or, closing or failed, did not: counted as dropped).
func (ls *LogStore) Settled(_ uint64, delivered bool) {
	if !delivered {
		ls.undelivered.Add(1)
	}
	ls.settled.Add(1)
	select {
	case ls.committed <- struct{}{}:
	default:
	}
}

// Drain implements Store: it waits (up to syncWait) until what was put is
// committed, then hands the records to f in order through the pull
// reader.
func (ls *LogStore) Drain(f func(r Record) bool) {
	ls.sync()
	_, _ = ls.r.Pull(func(m *sink.Message) bool {
		return f(Record{Device: m.Addr.Writer, Named: true, Created: m.Created, Payload: m.Payload()})
	})
}

// sync waits until every record put is committed, or syncWait passed.
func (ls *LogStore) sync() {
	if ls.settled.Load() >= ls.puts.Load() {
		return
	}
	t := time.NewTimer(syncWait)
	defer t.Stop()
	for ls.settled.Load() < ls.puts.Load() {
		select {
		case <-ls.committed:
		case <-t.C:
			return
		}
	}
}

// Stats implements Store: the records after the cursor and those waiting
// for their commit; Bytes is what the stream's records take in the log;
// Dropped what the log dropped (give way, maxAge) or could not append, in
// this process.
func (ls *LogStore) Stats() StoreStats {
	ss := ls.s.Stats()
	st := StoreStats{Bytes: int(ss.Bytes), Stream: ss.Name,
		Dropped: ss.Dropped + ss.Expired + ls.undelivered.Load() + ls.refused.Load()}
	for _, r := range ss.Readers {
		if r.Consumer == logConsumer {
			if from := max(r.Acked+1, ss.FirstSeq); ss.LastSeq >= from {
				st.Messages = int(ss.LastSeq - from + 1)
			}
		}
	}
	settled := ls.settled.Load() // before puts: never more than it
	st.Messages += int(ls.puts.Load() - settled)
	return st
}

// Durable implements Store: the records outlive the process.
func (ls *LogStore) Durable() bool { return true }
