//go:build !race

package embedded

import (
	"os"
	"testing"

	"github.com/nats-io/nats-server/v2/server/pse"
)

// The sampler reads the file ProcUsage reads: once StopNATSSampler pointed
// it elsewhere, ProcUsage fails, and so does the sampler's next read, which
// ends it. (Run without -race by scripts/test.sh.)
func TestStopNATSSampler(t *testing.T) {
	var pcpu float64
	var rss, vss int64
	if err := pse.ProcUsage(&pcpu, &rss, &vss); err != nil || rss == 0 {
		t.Fatalf("before: ProcUsage = %v, rss %d; want the process's figures", err, rss)
	}
	if !StopNATSSampler() {
		t.Fatalf("StopNATSSampler did not stop the sampler (its file: %q)", pseProcStatFile)
	}
	if _, err := os.Stat(pseProcStatFile); !os.IsNotExist(err) {
		t.Fatalf("the sampler's file %q: %v; want it missing", pseProcStatFile, err)
	}
	if err := pse.ProcUsage(&pcpu, &rss, &vss); err == nil {
		t.Fatal("after: ProcUsage read its file still")
	}
	if StopNATSSampler() {
		t.Fatal("a second StopNATSSampler reported it stopped the sampler again")
	}
}
