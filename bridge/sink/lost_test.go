package sink

import (
	"errors"
	"sync"
	"testing"
)

func TestLost(t *testing.T) {
	l := NewLost()
	if l.Is() || l.Err() != nil {
		t.Fatal("a new Lost is marked")
	}
	first, second := errors.New("first"), errors.New("second")
	var wg sync.WaitGroup
	l.Mark(first)
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); l.Mark(second) }()
	}
	wg.Wait()
	<-l.C()
	if !l.Is() || l.Err() != first {
		t.Fatalf("Is %v, Err %v; want true and the first reason", l.Is(), l.Err())
	}
}
