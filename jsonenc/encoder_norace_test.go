//go:build !race

package jsonenc

import (
	"testing"

	"github.com/uagate/gateway/uastack/ua"
)

// Allocation tests: the race detector allocates on its own account, so they
// are built without it only (scripts/test.sh runs them in a step of their own).

// TestAllocs: the encode path allocates nothing in steady state.
func TestAllocs(t *testing.T) {
	names, dvs := benchFields(1000)
	for _, mode := range allModes {
		for _, out := range []string{"memory", "writer", "split", "gzip"} {
			opts := WriterOptions{Sink: func([]byte) error { return nil }}
			switch out {
			case "writer":
				opts = WriterOptions{Writer: &countWriter{}}
			case "split":
				opts.MaxMessageSize = 16 << 10
			case "gzip":
				opts.Gzip, opts.MaxMessageSize = true, 64<<10
			}
			w := NewNetworkMessageWriter(opts)
			encodeBenchMessage(w, mode, names, dvs) // warm up buffers
			n := testing.AllocsPerRun(20, func() {
				if err := encodeBenchMessage(w, mode, names, dvs); err != nil {
					t.Fatal(err)
				}
			})
			w.Release()
			if n != 0 {
				t.Errorf("%s/%s: %v allocs per message", mode, out, n)
			}
		}
	}
	// Every value type through the plain Encoder.
	cases := variantCases()
	e := NewEncoder(nil, Options{Mode: Verbose, NamespaceURIs: testNamespaces})
	defer e.Release()
	for _, mode := range allModes {
		e.SetMode(mode)
		for i := range cases {
			if cases[i].v.Type() == ua.TypeExtensionObject {
				continue // binary bodies go through ua.Encoder
			}
			n := testing.AllocsPerRun(50, func() {
				e.Truncate()
				e.WriteVariant(&cases[i].v)
			})
			if n != 0 {
				t.Errorf("%s %s: %v allocs", mode, cases[i].name, n)
			}
		}
	}
	// Encoders from the pool.
	n := testing.AllocsPerRun(100, func() {
		e := NewEncoder(nil, Options{})
		e.WriteDouble(1)
		e.Release()
	})
	if n != 0 {
		t.Errorf("NewEncoder/Release: %v allocs", n)
	}
}

// TestResetAllocs: a NetworkMessageWriter Reset for a cycle keeps its
// buffers: Reset and a message allocate nothing.
func TestResetAllocs(t *testing.T) {
	names, dvs := benchFields(100)
	sink := func([]byte) error { return nil }
	w := NewNetworkMessageWriter(WriterOptions{Sink: sink})
	defer w.Release()
	encodeBenchMessage(w, Compact, names, dvs) // warm up buffers
	if n := testing.AllocsPerRun(20, func() {
		w.Reset(WriterOptions{})
		w.Reset(WriterOptions{Sink: sink, MaxMessageSize: 1 << 20})
		encodeBenchMessage(w, Compact, names, dvs)
	}); n != 0 {
		t.Errorf("%v allocations per Reset and message", n)
	}
}
