package ua

import (
	"testing"
	"unsafe"
)

// TestPooledRetainLimit: a pooled notification whose slices grew past
// MaxPooledBytes goes back to its pool without them, one below keeps them for the
// next decode; the same holds for the slices of a reused PublishResponse.
func TestPooledRetainLimit(t *testing.T) {
	small := NewDataChangeNotification()
	small.MonitoredItems = make([]MonitoredItemNotification, 1000)
	small.MonitoredItems[0].Value.Value.SetString("x")
	small.reset()
	if cap(small.MonitoredItems) != 1000 || len(small.MonitoredItems) != 0 {
		t.Errorf("1000 items: cap %d len %d after reset, want the capacity kept", cap(small.MonitoredItems), len(small.MonitoredItems))
	}
	if s := small.MonitoredItems[:1][0].Value.Value.Str(); s != "" {
		t.Errorf("kept element not cleared: %q", s)
	}

	huge := NewDataChangeNotification()
	huge.MonitoredItems = make([]MonitoredItemNotification, 20_000) // 1.6 MB
	huge.reset()                                                    // what Release does before the pool keeps it
	if huge.MonitoredItems != nil {
		t.Errorf("20,000 items: cap %d kept by the pool, want the slice dropped", cap(huge.MonitoredItems))
	}
	big := NewDataChangeNotification()
	big.DiagnosticInfos = make([]DiagnosticInfo, 20_000)
	big.reset()
	if big.DiagnosticInfos != nil {
		t.Errorf("20,000 diagnostic infos: cap %d kept", cap(big.DiagnosticInfos))
	}

	// 100 events of 300 fields: each list is small, together 1.4 MB.
	events := NewEventNotificationList()
	events.Events = make([]EventFieldList, 100)
	for i := range events.Events {
		events.Events[i].EventFields = make([]Variant, 300)
	}
	if n := events.retainedBytes(); n < 100*300*48 {
		t.Fatalf("retainedBytes = %d, want at least %d", n, 100*300*48)
	}
	events.reset()
	if events.Events != nil {
		t.Errorf("events keeping %d bytes in nested fields not dropped", 100*300*48)
	}
	few := NewEventNotificationList()
	few.Events = make([]EventFieldList, 10)
	for i := range few.Events {
		few.Events[i].EventFields = make([]Variant, 10)
	}
	few.reset()
	if cap(few.Events) != 10 || cap(few.Events[:1][0].EventFields) != 10 {
		t.Errorf("small event list lost its capacity: %d, %d", cap(few.Events), cap(few.Events[:1][0].EventFields))
	}
	fields := NewEventFieldList()
	fields.EventFields = make([]Variant, 30_000)
	fields.reset()
	if fields.EventFields != nil {
		t.Errorf("30,000 event fields kept")
	}

	var r PublishResponse
	r.NotificationMessage.NotificationData = make([]ExtensionObject, 20_000)
	r.Results = make([]StatusCode, 300_000)
	r.AvailableSequenceNumbers = make([]uint32, 10)
	r.Release()
	if r.NotificationMessage.NotificationData != nil || r.Results != nil {
		t.Errorf("PublishResponse kept %d notification data, %d results", cap(r.NotificationMessage.NotificationData), cap(r.Results))
	}
	if cap(r.AvailableSequenceNumbers) != 10 {
		t.Errorf("small AvailableSequenceNumbers dropped")
	}
}

// TestIdlePooledBudget: idle pooled notifications keep their slices only
// within MaxIdlePooledBytes, all together; the bytes are given back when
// they leave the pool, and those past the budget come back bare.
func TestIdlePooledBudget(t *testing.T) {
	const items = 1000
	per := items*int(unsafe.Sizeof(MonitoredItemNotification{})) + int(unsafe.Sizeof(idleEntry[DataChangeNotification]{}))
	// Capacity other tests left idle would be handed to the objects taken
	// below (and dropped by their Grow from zero), moving the count: let it
	// go first.
	TrimIdlePooled()
	TrimIdlePooled()
	base := IdlePooledBytes()
	old := SetMaxIdlePooledBytes(base + 3*per)
	defer SetMaxIdlePooledBytes(old)
	if MaxIdlePooledBytes() != base+3*per {
		t.Fatalf("MaxIdlePooledBytes %d after setting %d", MaxIdlePooledBytes(), base+3*per)
	}
	objs := make([]*DataChangeNotification, 5)
	for i := range objs {
		objs[i] = NewDataChangeNotification()
		objs[i].MonitoredItems = Grow(objs[i].MonitoredItems[:0:0], items)
	}
	refused, refusedBytes := IdlePooledRefused()
	for _, o := range objs {
		o.Release()
	}
	if n, b := IdlePooledRefused(); n != refused+2 || b != refusedBytes+2*uint64(per) {
		t.Errorf("refused %d objects of %d bytes, want 2 of %d", n-refused, b-refusedBytes, 2*per)
	}
	if got := IdlePooledBytes(); got != base+3*per {
		t.Fatalf("idle pooled bytes %d after 5 releases of %d, want %d (3 within the budget)", got, per, base+3*per)
	}
	// Take them out again: the next three come with the capacity (the most
	// recently put first), and the budget is given back.
	var taken []*DataChangeNotification
	for range 3 {
		o := NewDataChangeNotification()
		taken = append(taken, o)
		if cap(o.MonitoredItems) != items || len(o.MonitoredItems) != 0 {
			t.Errorf("object %d taken back with len %d cap %d, want 0 and %d", len(taken), len(o.MonitoredItems), cap(o.MonitoredItems), items)
		}
	}
	if IdlePooledBytes() != base {
		t.Errorf("idle bytes %d with the three taken, want %d", IdlePooledBytes(), base)
	}
	// They can be released again, and decoded into.
	taken[0].MonitoredItems = Grow(taken[0].MonitoredItems, items)
	for _, o := range taken {
		o.Release()
	}
	if IdlePooledBytes() != base+3*per {
		t.Errorf("idle pooled bytes %d after the three came back, want %d", IdlePooledBytes(), base+3*per)
	}
	for range 3 {
		NewDataChangeNotification().MonitoredItems = nil // taken for good: the GC's
	}
	if IdlePooledBytes() != base {
		t.Errorf("idle pooled bytes %d after the three were taken for good, want %d", IdlePooledBytes(), base)
	}
	// A second Release of an object already back changes nothing.
	o := NewDataChangeNotification()
	o.MonitoredItems = make([]MonitoredItemNotification, 10)
	o.Release()
	after := IdlePooledBytes()
	o.Release()
	if IdlePooledBytes() != after {
		t.Errorf("a double Release counted %d bytes again", IdlePooledBytes()-after)
	}
}

// TestTrimIdlePooled: the capacity a burst left idle, which no decode took
// for a whole period, is let go by the next trim; what a recurring decode
// takes each period stays.
func TestTrimIdlePooled(t *testing.T) {
	const items = 1000
	per := items*int(unsafe.Sizeof(MonitoredItemNotification{})) + int(unsafe.Sizeof(idleEntry[DataChangeNotification]{}))
	burst := func(n int) {
		objs := make([]*DataChangeNotification, n)
		for i := range objs {
			objs[i] = NewDataChangeNotification()
			objs[i].MonitoredItems = Grow(objs[i].MonitoredItems[:0], items)
		}
		for _, o := range objs {
			o.Release()
		}
	}
	TrimIdlePooled()
	TrimIdlePooled() // whatever other tests left idle is gone
	base := IdlePooledBytes()
	burst(8) // a burst: 8 at once
	if got := IdlePooledBytes() - base; got != 8*per {
		t.Fatalf("idle after the burst %d, want %d", got, 8*per)
	}
	TrimIdlePooled() // the period of the burst: its gets emptied the stack
	if got := IdlePooledBytes() - base; got != 8*per {
		t.Fatalf("the first trim let go of %d bytes; the burst's period took everything, want 0", 8*per-got)
	}
	burst(2) // the steady state: 2 at once
	if n := TrimIdlePooled(); n != 6*per {
		t.Fatalf("trim let go of %d bytes, want %d (the 6 entries no decode took)", n, 6*per)
	}
	for range 3 {
		burst(2)
		if n := TrimIdlePooled(); n != 0 {
			t.Fatalf("trim let go of %d bytes the recurring 2 need", n)
		}
	}
	refused, _ := IdlePooledRefused()
	burst(2)
	if got := IdlePooledBytes() - base; got != 2*per {
		t.Fatalf("idle %d after the steady burst, want %d", got, 2*per)
	}
	if n, _ := IdlePooledRefused(); n != refused {
		t.Fatalf("%d refused in the steady state", n-refused)
	}
}
