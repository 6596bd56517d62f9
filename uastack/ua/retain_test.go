package ua

import "testing"

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
