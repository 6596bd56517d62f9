package server

import (
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// TestSimStagger: with Stagger the Load folders of a rate tick evenly over
// its period, each value stamped with its own tick, never in the future;
// without it every folder ticks at the same instant.
func TestSimStagger(t *testing.T) {
	const folders, period = 4, 100 * time.Millisecond
	for _, stagger := range []bool{false, true} {
		s := startServer(t, func(c *Config) {
			c.Sim = SimConfig{Folders: folders, Variables: 3, Rates: []time.Duration{period},
				Types: []ua.TypeID{ua.TypeInt32}, Generators: []Generator{GeneratorCounter}, AlarmInterval: -1, Stagger: stagger}
		})
		base := s.start.UnixNano()
		now := time.Now().UnixNano()
		for f := range folders {
			want := base
			if stagger && f > 0 {
				want = base + int64(period)*int64(f)/folders - int64(period)
			}
			for v := range 3 {
				n := s.as.get(ua.MustParseNodeID(LoadNode(f, v)))
				if n == nil || n.gen == nil {
					t.Fatalf("stagger %v: no generator at %s", stagger, LoadNode(f, v))
				}
				if n.gen.start != want {
					t.Errorf("stagger %v: %s starts at %+d ns from the server, want %+d", stagger, LoadNode(f, v), n.gen.start-base, want-base)
				}
				dv := s.readValue(n, 0)
				src := int64(dv.SourceTimestamp-116444736000000000) * 100
				if src > now+int64(time.Millisecond) || src < now-int64(period)-int64(time.Second) {
					t.Errorf("stagger %v: %s: SourceTimestamp %v, read at %v", stagger, LoadNode(f, v), time.Unix(0, src), time.Unix(0, now))
				}
				// The value is the tick whose start is the SourceTimestamp.
				if tick := n.gen.tickAt(src); dv.Value.RawBits() != uint64(tick) || n.gen.tickTime(tick) != dv.SourceTimestamp {
					t.Errorf("stagger %v: %s: value %d stamped %v, tick %d", stagger, LoadNode(f, v), dv.Value.RawBits(), dv.SourceTimestamp, tick)
				}
			}
		}
	}
}
