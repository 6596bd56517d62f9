package gateway

import (
	"cmp"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/sparkplug"
	"github.com/uagate/gateway/bridge/storelog"
)

// The store-and-forward log (bridge/storelog) between the writer groups
// and the sinks: each writer group appends to a stream of its own (its
// only at-least-once queue: its notifications are acknowledged upstream
// once appended), and every sink's Output is fed from every stream by a
// reader with the sink's durable cursor. The WebSocket hub still takes the
// groups' messages directly: it shows live data, not the log.
//
// A Sparkplug sink's node holds what it cannot send (its primary host
// offline) in a stream of its own, sparkplug.StreamName(sink), that it
// reads itself (sparkplug.LogStore); no sink's reader is made for it, and
// one of a Sparkplug sink no longer configured is dropped at the start.
//
// A stream outlives its writer group: a group removed by a reload, or
// handed to another replica, leaves what its sinks have not had yet in the
// log, and the readers go on delivering it. At a start, streams of groups
// no longer configured are drained the same way, and dropped when empty.

// runStream is a stream and the readers feeding the sinks from it.
type runStream struct {
	s       *storelog.Stream
	readers []*storelog.Reader
	outputs []*runOutput // readers[i] feeds outputs[i]
}

// openStore opens the log under <stateDir>/log when the configuration
// turns it on; a log that cannot be opened is logged and the gateway runs
// without it.
func (gw *Gateway) openStore(cfg *config.Config, stateOK bool) {
	sf := &cfg.StoreAndForward
	if !cfg.StoreOn() {
		why := "storeAndForward.enabled: false"
		if cfg.ScaleOut.Enabled {
			why = "scale-out: a writer group moves between replicas with its subscription at the server"
		}
		gw.log.Info("store-and-forward log off: the OPC UA servers' queues are the only buffer", "why", why)
		return
	}
	if !stateOK {
		gw.log.Warn("store-and-forward log off: no usable state directory; the OPC UA servers' queues are the only buffer", "stateDir", cfg.Gateway.StateDir)
		return
	}
	dir := filepath.Join(cfg.Gateway.StateDir, "log")
	l, err := storelog.Open(storelog.Options{
		Dir:      dir,
		MaxBytes: sf.MaxBytes,
		MaxAge:   sf.MaxAge.D(),
		Policy:   sf.Policy,
		NoSync:   sf.Fsync != nil && !*sf.Fsync,
		// 0 (a configuration without defaults): commit at once.
		CommitInterval: cmp.Or(sf.CommitInterval.D(), -1),
		Publisher:      cfg.Gateway.PublisherID,
		Logger:         gw.log,
	})
	if err != nil {
		gw.log.Warn("store-and-forward log off: it cannot be opened; the OPC UA servers' queues are the only buffer", "dir", dir, "err", err)
		return
	}
	gw.store = l
	gw.streams = map[string]*runStream{}
	gw.log.Info("store-and-forward log", "file", l.Path(), "maxBytes", sf.MaxBytes, "maxAge", sf.MaxAge.D(), "policy", sf.Policy)
}

// startStreams opens the streams of the configured writer groups and those
// the log still holds records of (removed groups: drained), each with its
// readers; after the sinks' Outputs exist.
func (gw *Gateway) startStreams(cfg *config.Config) error {
	if gw.store == nil {
		return nil
	}
	configured := map[string]bool{}
	for i := range cfg.WriterGroups {
		configured[cfg.WriterGroups[i].Name] = true
	}
	names := gw.store.Streams()
	for i := range cfg.WriterGroups {
		names = append(names, cfg.WriterGroups[i].Name)
	}
	for _, name := range names {
		if strings.HasPrefix(name, sparkplug.StreamPrefix) {
			gw.dropSparkplugStream(cfg, name)
			continue
		}
		s, err := gw.stream(name)
		if err != nil {
			return err
		}
		if configured[name] {
			continue
		}
		if st := s.Stats(); st.Records == 0 {
			gw.dropStream(name)
		} else {
			gw.log.Info("store-and-forward log: the records of a writer group no longer configured are delivered", "group", name, "records", st.Records)
		}
	}
	return nil
}

// dropSparkplugStream removes the stream of held data of a Sparkplug sink
// no longer configured (a Sparkplug sink's own is its store): no node
// will send it.
func (gw *Gateway) dropSparkplugStream(cfg *config.Config, name string) {
	for _, m := range cfg.Sinks.MQTT {
		if m.Sparkplug != nil && sparkplug.StreamName(m.Name) == name {
			return
		}
	}
	if n := gw.store.RemoveStream(name); n > 0 {
		gw.log.Warn("store-and-forward log: the data a Sparkplug sink no longer configured held for its host is dropped", "stream", name, "records", n)
	}
}

// dropStream removes the stream of a writer group no longer configured,
// with its readers, once it holds nothing.
func (gw *Gateway) dropStream(name string) {
	gw.streamMu.Lock()
	rs := gw.streams[name]
	delete(gw.streams, name)
	gw.streamMu.Unlock()
	if rs == nil {
		return
	}
	for _, r := range rs.readers {
		_ = r.Close(context.Background()) // started a moment ago, waiting on nothing
		r.Remove()
	}
	gw.store.RemoveStream(name)
}

// stream returns the stream of writer group name, opening it and starting
// its readers at first use.
func (gw *Gateway) stream(name string) (*storelog.Stream, error) {
	gw.streamMu.Lock()
	defer gw.streamMu.Unlock()
	if rs := gw.streams[name]; rs != nil {
		return rs.s, nil
	}
	s, err := gw.store.Stream(name)
	if err != nil {
		return nil, err
	}
	rs := &runStream{s: s}
	for _, o := range gw.outputs {
		if o.node != nil {
			continue // a Sparkplug B node takes the groups' values, not their messages
		}
		accept := notField
		if o.perField != nil {
			accept = onlyField
		}
		r, err := s.NewReader(o.Name(), o.Output, storelog.ReaderOptions{Accept: accept})
		if err != nil {
			return nil, err
		}
		rs.readers = append(rs.readers, r)
		rs.outputs = append(rs.outputs, o)
	}
	for _, r := range rs.readers {
		r.Start()
	}
	gw.streams[name] = rs
	return s, nil
}

// drainWait bounds how long a writer group that stops waits for its
// stream's connected sinks to have what it appended.
const drainWait = 5 * time.Second

// drainStream waits, up to drainWait or ctx, until every connected sink has
// settled what writer group name appended to the log: a group removed or
// handed to another replica is then done publishing when it is gone (a
// sink that is down gets the rest later, from the log).
func (gw *Gateway) drainStream(ctx context.Context, name string) {
	if gw.store == nil {
		return
	}
	gw.streamMu.Lock()
	rs := gw.streams[name]
	gw.streamMu.Unlock()
	if rs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, drainWait)
	defer cancel()
	drained := func() bool {
		st := rs.s.Stats()
		for i, r := range st.Readers {
			if r.BacklogMessages > 0 && i < len(rs.outputs) && rs.outputs[i].Stats().Connected {
				return false
			}
		}
		return st.Pending == 0
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !drained() {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func onlyField(k sink.Kind) bool { return k == sink.KindField }
func notField(k sink.Kind) bool  { return k != sink.KindField }

// closeStore stops the readers, alongside the Outputs' close (a reader
// waiting in a full queue is released by it), then closes the log once
// both are done: its last commit saves the cursors the drain moved.
func (gw *Gateway) stopReaders(ctx context.Context, wg *sync.WaitGroup) {
	gw.streamMu.Lock()
	var readers []*storelog.Reader
	for _, rs := range gw.streams {
		readers = append(readers, rs.readers...)
	}
	gw.streamMu.Unlock()
	for _, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Close(ctx); err != nil {
				gw.log.Warn("store-and-forward reader", "err", err)
			}
		}()
	}
}

// closeStore closes the log and the dead-letter file after the readers
// and Outputs.
func (gw *Gateway) closeStore() {
	if gw.deadLetters != nil {
		_ = gw.deadLetters.Close()
	}
	if gw.store == nil {
		return
	}
	if err := gw.store.Close(); err != nil {
		gw.log.Warn("store-and-forward log close", "err", err)
	}
}

// StoreStats returns the log's counters: every stream with its readers
// (nil when the gateway runs without the log).
func (gw *Gateway) StoreStats() *storelog.Stats {
	if gw.store == nil {
		return nil
	}
	st := gw.store.Stats()
	return &st
}
