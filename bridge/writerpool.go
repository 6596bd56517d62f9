package bridge

import (
	"sync"

	"github.com/uagate/gateway/jsonenc"
)

// The groups share their JSON writers. A writer is busy only while a group
// writes one notification message (or a keep-alive, a heartbeat), and it
// keeps a buffer as large as the largest message it wrote (up to
// MaxMessageSize): one per group, idle almost all the time, that was ~18 MB
// at a million items in 100 groups. Borrowed for a cycle (beginCycle …
// endCycle) and Reset for the group's options, the gateway keeps about as
// many as write at once, plus at most maxIdleWriters idle ones.

// maxIdleWriters bounds the idle writers kept; more are released (their
// buffers go back to jsonenc's pool).
const maxIdleWriters = 8

var idleWriters struct {
	mu sync.Mutex
	ws []*jsonenc.NetworkMessageWriter
}

// takeWriter returns a writer for opts, an idle one when there is one.
func takeWriter(opts *jsonenc.WriterOptions) *jsonenc.NetworkMessageWriter {
	idleWriters.mu.Lock()
	if n := len(idleWriters.ws); n > 0 {
		w := idleWriters.ws[n-1]
		idleWriters.ws[n-1] = nil
		idleWriters.ws = idleWriters.ws[:n-1]
		idleWriters.mu.Unlock()
		w.Reset(*opts)
		return w
	}
	idleWriters.mu.Unlock()
	return jsonenc.NewNetworkMessageWriter(*opts)
}

// putWriter gives back a writer taken with takeWriter, outside a cycle. It
// keeps no reference to its group (its Sink, namespaces).
func putWriter(w *jsonenc.NetworkMessageWriter) {
	if w.Err() != nil {
		w.Release()
		return
	}
	w.Reset(jsonenc.WriterOptions{})
	idleWriters.mu.Lock()
	if len(idleWriters.ws) < maxIdleWriters {
		idleWriters.ws = append(idleWriters.ws, w)
		idleWriters.mu.Unlock()
		return
	}
	idleWriters.mu.Unlock()
	w.Release()
}
