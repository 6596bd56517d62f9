package client

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/uagate/gateway/uastack/ua"
)

// TestDropResentDigest: in a window after a recovery, a notification is
// dropped only when its source timestamp, value, type and status all repeat
// the last delivered one; a change in any one of them alone is delivered.
// Outside a window nothing is dropped; a fresh message closes the window.
func TestDropResentDigest(t *testing.T) {
	p := &publisher{fp: newFingerprinter()}
	sub := &Subscription{}
	sub.items.push(item{})
	const ts = ua.DateTime(133_000_000_000_000_000)
	note := func(v ua.Variant, st ua.StatusCode, src ua.DateTime) ua.MonitoredItemNotification {
		return ua.MonitoredItemNotification{ClientHandle: 1, Value: ua.DataValue{Value: v, Status: st, SourceTimestamp: src}}
	}
	send := func(fresh bool, n ua.MonitoredItemNotification) bool {
		return len(p.dropResent(sub, []ua.MonitoredItemNotification{n}, fresh)) == 1
	}
	base := note(ua.MustVariant(float64(7)), ua.StatusGood, ts)
	for range 2 {
		if !send(true, base) {
			t.Fatal("outside a window a repeated value was dropped")
		}
	}
	sub.armResend()
	for _, c := range []struct {
		name string
		n    ua.MonitoredItemNotification
	}{
		{"another value", note(ua.MustVariant(float64(8)), ua.StatusGood, ts)},
		{"another status", note(ua.MustVariant(float64(7)), ua.StatusUncertain, ts)},
		{"another type, same bits", note(ua.MustVariant(int64(math.Float64bits(7))), ua.StatusGood, ts)},
		{"another timestamp", note(ua.MustVariant(float64(7)), ua.StatusGood, ts+1)},
		{"no timestamp", note(ua.MustVariant(float64(7)), ua.StatusGood, 0)},
	} {
		// Each case follows a delivery of base, inside the window.
		send(false, base) // base is dropped or delivered; either way it is the last value
		if !send(false, c.n) {
			t.Errorf("%s: dropped as a resent value", c.name)
		}
	}
	send(false, base)
	if send(false, base) {
		t.Error("in the window, the same value, status and timestamp was delivered again")
	}
	if sub.stats.suppressed.Load() == 0 {
		t.Error("nothing counted as suppressed")
	}
	// A fresh message is compared too, and closes the window.
	if send(true, base) {
		t.Error("a fresh message resending the last value in the window was delivered")
	}
	if !send(true, base) {
		t.Error("after the window closed a repeated value was dropped")
	}
	// Text values: the same text again in a window is dropped, another is not.
	s1 := note(ua.MustVariant("alpha"), ua.StatusGood, ts)
	s2 := note(ua.MustVariant("alphb"), ua.StatusGood, ts)
	send(true, s1)
	sub.armResend()
	if !send(false, s2) {
		t.Error("another text at the same timestamp was dropped")
	}
	if send(false, s2) {
		t.Error("the same text again in the window was delivered")
	}
}

// TestDigestInjective: with the type and status fixed the digest is a
// bijection of the value's bits; across statuses and types of one value it
// differs too.
func TestDigestInjective(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	seen := make(map[uint64]uint64, 1<<16)
	for range 1 << 16 {
		fp := r.Uint64()
		d := digest(fp, uint8(ua.TypeDouble), ua.StatusGood)
		if prev, ok := seen[d]; ok && prev != fp {
			t.Fatalf("digest(%x) = digest(%x)", fp, prev)
		}
		seen[d] = fp
	}
	tags := make(map[uint64]bool)
	for _, st := range []ua.StatusCode{ua.StatusGood, ua.StatusUncertain, ua.StatusBadNodeIdUnknown, ua.StatusGood | 0x400} {
		for _, typ := range []uint8{uint8(ua.TypeDouble), uint8(ua.TypeInt64), uint8(ua.TypeDouble) | 0x80} {
			d := digest(42, typ, st)
			if tags[d] {
				t.Fatalf("digest(42, %d, %v) repeats another status or type", typ, st)
			}
			tags[d] = true
		}
	}
}
