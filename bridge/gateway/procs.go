package gateway

import (
	"context"
	goruntime "runtime"
	"syscall"
	"time"
)

// A quiet gateway runs the Go scheduler on one processor. At an ordinary
// rate (node-opcua's 10,000 changes/s: ~11 publish responses a second) the
// gateway's cost is per response, and much of it is the runtime's: each
// response wakes the channel's reader, the dispatch loop, a sink's worker
// and nats.go's flusher, and with two processors (Ps) each hand-off to an
// idle P wakes a thread of its own (a futex wake, a context switch, and a
// spinning thread looking for work) where on one P the readied goroutine
// runs next on the thread that readied it. Measured with the whole process
// at GOMAXPROCS=1: 0.90 → 0.75 µs per notification without the log, 2.14 →
// 1.80 with it, 220 → 121 thread wake-ups a second.
//
// GovernProcs samples the process's CPU time every procsEvery: below
// procsQuiet of a core for procsQuietFor periods in a row it sets
// GOMAXPROCS to 1; above procsBusy in one period it restores the runtime's
// default (runtime.SetDefaultGOMAXPROCS: the machine's or the container's
// CPUs). A burst (a large configuration subscribing, a backlog draining)
// thus runs on one P for at most procsEvery. A gateway at rest (below
// procsRest on one P) is sampled every procsRestEvery instead: a wake-up a
// second is the largest part of what it costs at rest then, and a burst
// out of that rest may run on one P for that long. GOMAXPROCS in the
// environment turns it off (the operator chose), and so does a default of
// one P.
const (
	procsEvery     = time.Second
	procsRestEvery = 5 * time.Second
	procsQuiet     = 0.15  // cores
	procsBusy      = 0.5   // cores, of the one P's at most one
	procsRest      = 0.005 // cores
	procsQuietFor  = 3
)

// procsGovernor is GovernProcs' decision, apart from the clock, the CPU
// time and the runtime so that it can be tested.
type procsGovernor struct {
	cpu     func() time.Duration // the process's CPU time so far
	single  func()               // GOMAXPROCS(1)
	restore func()               // the runtime's default
	one     bool                 // on one P now
	quiet   int                  // periods below procsQuiet in a row
	lastCPU time.Duration
	lastAt  time.Time
}

// step takes a sample at now and reports the usage since the last one (in
// cores) and whether it changed the processors.
func (g *procsGovernor) step(now time.Time) (usage float64, changed bool) {
	cpu := g.cpu()
	wall := now.Sub(g.lastAt)
	prevCPU, first := g.lastCPU, g.lastAt.IsZero()
	g.lastCPU, g.lastAt = cpu, now
	if first || wall <= 0 {
		return 0, false
	}
	usage = float64(cpu-prevCPU) / float64(wall)
	if g.one {
		if usage > procsBusy {
			g.one, g.quiet = false, 0
			g.restore()
			return usage, true
		}
		return usage, false
	}
	if usage < procsQuiet {
		g.quiet++
	} else {
		g.quiet = 0
	}
	if g.quiet >= procsQuietFor {
		g.one, g.quiet = true, 0
		g.single()
		return usage, true
	}
	return usage, false
}

// next is how long after a sample of usage (cores) the next is taken.
func (g *procsGovernor) next(usage float64) time.Duration {
	if g.one && usage < procsRest {
		return procsRestEvery
	}
	return procsEvery
}

// processCPU is the process's user and system CPU time (getrusage; no
// allocation).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// GovernProcs runs the governor (see procsEvery) until ctx ends; getenv
// reads the environment, logf is told of each change; it reports whether
// it started. It starts nothing when GOMAXPROCS is set or the default is
// one P. Meant for the gateway's own process (gateway run), not a program
// that embeds the gateway among other work.
func GovernProcs(ctx context.Context, getenv func(string) string, logf func(msg string, args ...any)) bool {
	if getenv("GOMAXPROCS") != "" || goruntime.GOMAXPROCS(0) <= 1 {
		return false
	}
	g := &procsGovernor{
		cpu:     processCPU,
		single:  func() { goruntime.GOMAXPROCS(1) },
		restore: goruntime.SetDefaultGOMAXPROCS,
	}
	go func() {
		t := time.NewTimer(procsEvery)
		defer t.Stop()
		g.step(time.Now())
		for {
			select {
			case <-ctx.Done():
				if g.one {
					g.restore()
				}
				return
			case now := <-t.C:
				usage, changed := g.step(now)
				if changed {
					logf("scheduler processors changed", "gomaxprocs", goruntime.GOMAXPROCS(0), "cores", usage)
				}
				t.Reset(g.next(usage))
			}
		}
	}()
	return true
}
