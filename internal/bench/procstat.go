package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// What /proc says of the bench's processes and of the machine.

// procSample is what one process used so far.
type procSample struct {
	cpu      time.Duration // user + system, all threads
	switches int64         // context switches of all threads (voluntary + involuntary)
}

// sampleProcs returns the samples of processes, in order.
func sampleProcs(ps []*proc) ([]procSample, error) {
	out := make([]procSample, len(ps))
	for i, p := range ps {
		d, err := procCPU(p.pid())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		if ns := procRunTime(p.pid()); ns > 0 {
			d = ns
		}
		out[i] = procSample{cpu: d, switches: procSwitches(p.pid())}
	}
	return out, nil
}

// procRunTime sums the time every thread of a process ran on a CPU
// (/proc/<pid>/task/*/schedstat, in nanoseconds: /proc/<pid>/stat counts in
// 10 ms ticks, too coarse for a process at rest). Threads that ended are not
// counted (the Go runtime keeps its threads). 0 when unreadable.
func procRunTime(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := bytes.Fields(b)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0
		}
		n += v
	}
	return time.Duration(n)
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// procCPU reads utime + stime of a process from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(u+s) * clockTick, nil
}

// procSwitches sums the context switches of every thread of a process
// (/proc/<pid>/task/*/status): a thread blocks and is woken once per
// voluntary switch, so their rate is the process's wake-ups. Threads that
// ended are not counted (the Go runtime keeps its threads). 0 when
// unreadable.
func procSwitches(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, key := range []string{"voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"} {
			if i := bytes.Index(b, []byte("\n"+key)); i >= 0 {
				rest := b[i+1+len(key):]
				if j := bytes.IndexByte(rest, '\n'); j >= 0 {
					rest = rest[:j]
				}
				v, _ := strconv.ParseInt(string(bytes.TrimSpace(rest)), 10, 64)
				n += v
			}
		}
	}
	return n
}

// procRSS reads VmRSS of a process from /proc/<pid>/status, bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: VmRSS %q: %w", pid, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// machineSample is the machine's CPU time so far (/proc/stat): busy is
// everything but idle and iowait, summed over the CPUs.
type machineSample struct {
	busy time.Duration
	cpus int
}

func sampleMachine() (machineSample, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineSample{}, err
	}
	var m machineSample
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			m.cpus++
			continue
		}
		// user nice system idle iowait irq softirq steal (guest is in user).
		for i, x := range f[1:min(len(f), 9)] {
			v, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return m, fmt.Errorf("/proc/stat: %q: %w", l, err)
			}
			if i != 3 && i != 4 {
				m.busy += time.Duration(v) * clockTick
			}
		}
	}
	if m.cpus == 0 {
		return m, errors.New("/proc/stat: no cpu lines")
	}
	return m, nil
}

// loadAverage returns the 1-minute load average (0 when unreadable).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
