//go:build !race

package embedded

import (
	"os"
	"strconv"
	"strings"
	_ "unsafe" // go:linkname

	// The package whose sampler StopNATSSampler stops (nats-server's
	// server package imports it: linking the embedded NATS server links it).
	_ "github.com/nats-io/nats-server/v2/server/pse"
)

// NATS's CPU sampler. nats-server's package pse starts, at init, a sampler
// that reads /proc/<pid>/stat every second for the rest of the process's
// life (it keeps the CPU percentage its server reports in /varz): in every
// program that links the server, whether one runs or not. At rest that is
// the gateway's costliest work: a third of its CPU and eight allocations a
// second (bench -idle). The package offers no way to stop it.
//
// It stops by itself when the file cannot be read: periodic returns before
// it schedules the next run. StopNATSSampler points it at a path that does
// not exist, of the same length, so that a read racing the store sees
// either whole string (the two words of a string are stored one at a time:
// the length never changes, and either pointer is valid for it). The race
// detector would report that store, so a -race build leaves the sampler
// alone (sampler_race.go).
//
//go:linkname pseProcStatFile github.com/nats-io/nats-server/v2/server/pse.procStatFile
var pseProcStatFile string

// StopNATSSampler stops nats-server's CPU sampler (see above) and reports
// whether it did. Only for a process that runs no NATS server, such as the
// gateway's own with embedded.nats off: a server's /varz would report no
// CPU or memory use afterwards.
func StopNATSSampler() bool {
	pid := strconv.Itoa(os.Getpid())
	if pseProcStatFile != "/proc/"+pid+"/stat" {
		return false // stopped already, or not the layout this expects
	}
	// "/proc/123/stat" → "/proc/---/stat": no such directory.
	pseProcStatFile = "/proc/" + strings.Repeat("-", len(pid)) + "/stat"
	return true
}
