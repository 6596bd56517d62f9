//go:build unix

package client

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) this process has used so far.
// The benchmarks report it per operation: on loopback the wall time is mostly
// the peer's, the CPU time is the client's alone.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
