package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Child processes.

// proc flags.
const (
	watchStdout = 1 << iota // stdout lines to lines (else to the log)
	watchStderr             // stderr lines to lines (else to the log)
	withStdin               // a pipe to the child's stdin
)

// procSet are the children of one bench run; stopAll ends those still
// running, in reverse order of their start.
type procSet struct {
	mu    sync.Mutex
	procs []*proc
}

// proc is one child process. Its output goes to <dir>/<name>.log; the
// watched stream's lines also go to lines (dropped when nobody reads them
// and 256 are pending), which is closed at the end of the stream.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	stdin   io.WriteCloser
	lines   chan string
	readers sync.WaitGroup
	done    chan struct{} // closed when the process was waited for
	err     error         // the exit status, after done
	once    sync.Once
}

// start starts argv as child name, its log in dir, with env added to the
// bench's environment.
func (ps *procSet) start(name, dir string, argv []string, flags int, env []string) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "$ %s\n", strings.Join(argv, " "))
	p := &proc{name: name, logPath: logf.Name(), lines: make(chan string, 256), done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	// The child dies with us even if we are killed outright.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	var watchR, watchW *os.File
	if flags&(watchStdout|watchStderr) != 0 {
		if watchR, watchW, err = os.Pipe(); err != nil {
			logf.Close()
			return nil, err
		}
		if flags&watchStdout != 0 {
			p.cmd.Stdout = watchW
		} else {
			p.cmd.Stderr = watchW
		}
	} else {
		close(p.lines)
	}
	if flags&withStdin != 0 {
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			logf.Close()
			return nil, err
		}
	}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		if watchR != nil {
			watchR.Close()
			watchW.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	if watchW != nil {
		watchW.Close() // the child holds its end
		p.readers.Add(1)
		go func() {
			defer p.readers.Done()
			defer close(p.lines)
			defer watchR.Close()
			sc := bufio.NewScanner(watchR)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				if !strings.HasPrefix(sc.Text(), "{") { // not the subscriber's answers
					fmt.Fprintln(logf, sc.Text())
				}
				select {
				case p.lines <- sc.Text():
				default:
				}
			}
		}()
	}
	go func() {
		p.err = p.cmd.Wait()
		p.readers.Wait()
		logf.Close()
		close(p.done)
	}()
	ps.mu.Lock()
	ps.procs = append(ps.procs, p)
	ps.mu.Unlock()
	return p, nil
}

func (ps *procSet) byName(name string) *proc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

func (ps *procSet) stopAll() {
	ps.mu.Lock()
	list := append([]*proc(nil), ps.procs...)
	ps.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		list[i].stop()
	}
}

// tails returns the ends of the logs of ps, for an error message.
func (ps *procSet) tails(list ...*proc) string {
	var b strings.Builder
	for _, p := range list {
		data, _ := os.ReadFile(p.logPath)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(&b, "\n--- %s (%s):\n%s", p.name, p.logPath, strings.Join(lines, "\n"))
	}
	return b.String()
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// alive returns an error when the process has exited.
func (p *proc) alive() error {
	select {
	case <-p.done:
		if p.err == nil {
			return errors.New("exit status 0")
		}
		return p.err
	default:
		return nil
	}
}

// waitLine waits for a line of the watched stream that contains want.
func (p *proc) waitLine(ctx context.Context, timeout time.Duration, want string) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.done
				return "", fmt.Errorf("%s ended (%v) before %q%s", p.name, p.err, want, (&procSet{}).tails(p))
			}
			if strings.Contains(l, want) {
				return l, nil
			}
		case <-t.C:
			return "", fmt.Errorf("%s: no %q within %v%s", p.name, want, timeout, (&procSet{}).tails(p))
		case <-ctx.Done():
			return "", fmt.Errorf("%s: waiting for %q: %w", p.name, want, ctx.Err())
		}
	}
}

// query sends a command to the subscriber and reads its JSON answer.
func (p *proc) query(ctx context.Context, cmd string) (subStats, error) {
	var st subStats
	if _, err := io.WriteString(p.stdin, cmd+"\n"); err != nil {
		return st, fmt.Errorf("%s: %w", p.name, err)
	}
	l, err := p.waitLine(ctx, 30*time.Second, "{")
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal([]byte(l), &st); err != nil {
		return st, fmt.Errorf("%s: %q: %w", p.name, l, err)
	}
	return st, nil
}

// stop ends the process: SIGTERM (stdin closed too), SIGKILL after 10 s.
func (p *proc) stop() {
	p.once.Do(func() {
		if p.stdin != nil {
			p.stdin.Close()
		}
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(10 * time.Second)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}
