package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgress(t *testing.T) {
	// Off a terminal: only the lines the caller forces, then the last one.
	var b bytes.Buffer
	p := newProgress(&b)
	if p.tty {
		t.Fatal("a buffer taken for a terminal")
	}
	p.update(false, "a %d", 1)
	p.update(true, "b %d", 2)
	p.done("c")
	if got := b.String(); got != "b 2\nc\n" {
		t.Fatalf("plain output %q", got)
	}

	// On a terminal: one line redrawn in place, at most every
	// progressRedraw, cleared before the final line.
	b.Reset()
	clock := time.Unix(0, 0)
	p = &progress{w: &b, tty: true, now: func() time.Time { return clock }}
	p.update(false, "n=%d", 1)
	p.update(false, "n=%d", 2) // too soon: not drawn
	clock = clock.Add(progressRedraw)
	p.update(false, "n=%d", 3)
	p.done("done")
	want := "\r\033[Kn=1" + "\r\033[Kn=3" + "\r\033[K" + "done\n"
	if got := b.String(); got != want {
		t.Fatalf("terminal output %q, want %q", got, want)
	}
	if strings.Contains(b.String(), "n=2") {
		t.Fatal("redrawn faster than progressRedraw")
	}
}
