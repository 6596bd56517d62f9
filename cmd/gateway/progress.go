package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// progress reports long work (browsing a large tree) on stderr: on a
// terminal one line redrawn in place at most every progressRedraw; anywhere
// else (a file, a pipe, CI) a plain line now and then, so that logs stay
// readable.
type progress struct {
	w     io.Writer
	tty   bool
	last  time.Time
	shown bool // a line is on screen (tty)
	now   func() time.Time
}

const progressRedraw = 100 * time.Millisecond

func newProgress(w io.Writer) *progress {
	return &progress{w: w, tty: isTerminal(w), now: time.Now}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// update shows the state of the work. force: a plain line is printed even
// off a terminal (the caller's own pacing, say every 1000 nodes).
func (p *progress) update(force bool, format string, args ...any) {
	if !p.tty {
		if force {
			fmt.Fprintf(p.w, format+"\n", args...)
		}
		return
	}
	if t := p.now(); p.shown && t.Sub(p.last) < progressRedraw {
		return
	} else {
		p.last = t
	}
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
	p.shown = true
}

// done ends the progress line with a final one.
func (p *progress) done(format string, args ...any) {
	if p.tty && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, format+"\n", args...)
	p.shown = false
}
