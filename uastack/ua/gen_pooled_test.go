package ua

import (
	"reflect"
	"sync"
	"testing"
)

// The pooled notification types: a decoded PublishResponse fills pooled objects,
// Release gives them back keeping their capacity, decoding again reuses them, and in
// steady state decoding a PublishResponse allocates nothing.

func genPublishResponseBytes(t testing.TB) ([]byte, *PublishResponse) {
	for _, c := range genMessages() {
		if c.name == "PublishResponse" {
			return genEncode(t, c.msg), c.msg.(*PublishResponse)
		}
	}
	t.Fatal("no PublishResponse in the table")
	return nil, nil
}

func TestGenPooledPublishResponse(t *testing.T) {
	b, want := genPublishResponseBytes(t)
	dcnBefore, enlBefore := DataChangeNotificationPool.Stats(), EventNotificationListPool.Stats()

	var r PublishResponse
	genDecode(t, b, &r)
	if !reflect.DeepEqual(&r, want) {
		t.Fatalf("decoded\n got %+v\nwant %+v", &r, want)
	}
	nd := r.NotificationMessage.NotificationData
	dcn, ok := nd[0].Value.(*DataChangeNotification)
	if !ok {
		t.Fatalf("NotificationData[0] holds %T", nd[0].Value)
	}
	if _, ok := nd[1].Value.(*EventNotificationList); !ok {
		t.Fatalf("NotificationData[1] holds %T", nd[1].Value)
	}
	if got := DataChangeNotificationPool.Stats(); got.Hits+got.Misses != dcnBefore.Hits+dcnBefore.Misses+1 {
		t.Fatalf("DataChangeNotification not taken from its pool: %+v then %+v", dcnBefore, got)
	}

	// Decoding again into the same response decodes into the same objects.
	genDecode(t, b, &r)
	if r.NotificationMessage.NotificationData[0].Value != Encodable(dcn) {
		t.Fatalf("second decode replaced the DataChangeNotification instead of reusing it")
	}

	items := dcn.MonitoredItems[:3]
	r.Release()
	if len(r.NotificationMessage.NotificationData) != 0 || cap(r.NotificationMessage.NotificationData) < 3 {
		t.Fatalf("NotificationData after Release: len %d cap %d", len(r.NotificationMessage.NotificationData), cap(r.NotificationMessage.NotificationData))
	}
	for i, eo := range r.NotificationMessage.NotificationData[:3] {
		if !eo.IsNull() || eo.Value != nil {
			t.Fatalf("NotificationData[%d] not cleared: %+v", i, eo)
		}
	}
	if got := DataChangeNotificationPool.Stats(); got.Puts+got.Drops != dcnBefore.Puts+dcnBefore.Drops+1 {
		t.Fatalf("DataChangeNotification not given back: %+v then %+v", dcnBefore, got)
	}
	if got := EventNotificationListPool.Stats(); got.Puts+got.Drops != enlBefore.Puts+enlBefore.Drops+1 {
		t.Fatalf("EventNotificationList not given back: %+v then %+v", enlBefore, got)
	}
	// The pool reset it (reading a released object is only done here, to check the
	// reset): bare, its elements cleared, their capacity idle for the next one.
	if dcn.MonitoredItems != nil {
		t.Fatalf("released DataChangeNotification: len %d cap %d, want its slices idle apart", len(dcn.MonitoredItems), cap(dcn.MonitoredItems))
	}
	for i := range items {
		if m := &items[i]; m.ClientHandle != 0 || !m.Value.Value.IsNull() {
			t.Fatalf("MonitoredItems[%d] not cleared: %+v", i, m)
		}
	}

	// A second Release is harmless: nothing is left to give back.
	r.Release()
	if got := DataChangeNotificationPool.Stats(); got.DoublePuts != dcnBefore.DoublePuts {
		t.Fatalf("second PublishResponse.Release put again: %+v", got)
	}

	// The next decode takes the idle objects from the pool.
	hits := DataChangeNotificationPool.Stats().Hits
	genDecode(t, b, &r)
	if DataChangeNotificationPool.Stats().Hits != hits+1 {
		t.Fatalf("decode after Release did not reuse a pooled DataChangeNotification")
	}
	if !reflect.DeepEqual(&r, want) {
		t.Fatalf("decoded into pooled objects\n got %+v\nwant %+v", &r, want)
	}
	r.Release()
}

// TestGenPooledSpareCapacity: when a shorter message is decoded into a response,
// the notifications beyond the new length are cleared (Grow's invariant), so the
// spare capacity holds nothing and Release only walks what is in use.
func TestGenPooledSpareCapacity(t *testing.T) {
	long, _ := genPublishResponseBytes(t)
	short := genEncode(t, &PublishResponse{SubscriptionID: 7, NotificationMessage: NotificationMessage{
		SequenceNumber: 9, NotificationData: []ExtensionObject{NewExtensionObject(genDataChange())},
	}})
	var r PublishResponse
	genDecode(t, long, &r)
	if len(r.NotificationMessage.NotificationData) < 2 {
		t.Fatal("long message must carry several notifications")
	}
	genDecode(t, short, &r)
	if n := len(r.NotificationMessage.NotificationData); n != 1 {
		t.Fatalf("len %d", n)
	}
	spare := r.NotificationMessage.NotificationData[1:cap(r.NotificationMessage.NotificationData)]
	for i, eo := range spare {
		if eo.Value != nil || eo.Body != nil || !eo.TypeID.IsNull() {
			t.Fatalf("spare element %d still holds %+v", i+1, eo)
		}
	}
	r.Release()
	if r.NotificationMessage.NotificationData[:1][0].Value != nil {
		t.Fatal("Release left a notification in place")
	}
}

func TestGenPooledNewRelease(t *testing.T) {
	x := NewEventFieldList()
	x.ClientHandle = 5
	x.EventFields = append(x.EventFields, NewDoubleVariant(1), NewStringVariant("a"), NewBooleanVariant(true))
	fields := x.EventFields[:3]
	before := EventFieldListPool.Stats()
	x.Release()
	x.Release() // ignored by the pool
	st := EventFieldListPool.Stats()
	if st.DoublePuts != before.DoublePuts+1 {
		t.Fatalf("second Release not caught: %+v", st)
	}
	if x.ClientHandle != 0 || x.EventFields != nil {
		t.Fatalf("reset left ClientHandle %d, len %d cap %d", x.ClientHandle, len(x.EventFields), cap(x.EventFields))
	}
	for i := range fields {
		if !fields[i].IsNull() {
			t.Fatalf("EventFields[%d] not cleared", i)
		}
	}
	y := NewEventFieldList()
	if y.ClientHandle != 0 || len(y.EventFields) != 0 || cap(y.EventFields) < 3 {
		t.Fatalf("pooled EventFieldList not empty, or without the capacity put back: %+v cap %d", y, cap(y.EventFields))
	}
	y.Release()

	m := NewMonitoredItemNotification()
	m.ClientHandle, m.Value.Value = 3, NewDoubleVariant(2)
	m.Release()
	if m.ClientHandle != 0 || !m.Value.Value.IsNull() {
		t.Fatalf("MonitoredItemNotification not reset")
	}

	// Registry construction comes from the pools too.
	info, ok := TypeByEncodingID(ID_DataChangeNotification_Encoding_DefaultBinary)
	if !ok {
		t.Fatal("DataChangeNotification not registered")
	}
	hits, misses := DataChangeNotificationPool.Stats().Hits, DataChangeNotificationPool.Stats().Misses
	v := info.New().(*DataChangeNotification)
	if st := DataChangeNotificationPool.Stats(); st.Hits+st.Misses != hits+misses+1 {
		t.Fatalf("TypeInfo.New did not use the pool")
	}
	v.Release()
}

// TestGenPooledConcurrent decodes and releases PublishResponses on several
// goroutines sharing the pools; the race detector watches for an object handed to
// two owners.
func TestGenPooledConcurrent(t *testing.T) {
	b, want := genPublishResponseBytes(t)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r PublishResponse
			d := NewDecoder(nil, nil)
			for i := 0; i < 200; i++ {
				d.Reset(b, nil)
				if _, err := d.ReadStructure(&r); err != nil {
					errs <- err.Error()
					return
				}
				dcn := r.NotificationMessage.NotificationData[0].Value.(*DataChangeNotification)
				if i%50 == 0 && !reflect.DeepEqual(&r, want) {
					errs <- "decoded response differs"
					return
				}
				for j := range dcn.MonitoredItems {
					dcn.MonitoredItems[j].ClientHandle++ // the owner may write
				}
				r.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// genNumericPublishResponse is a PublishResponse whose notifications hold only
// inline (numeric) values, so that decoding it needs no allocation.
func genNumericPublishResponse() *PublishResponse {
	return &PublishResponse{
		ResponseHeader:           ResponseHeader{Timestamp: genT0, RequestHandle: 3},
		SubscriptionID:           7,
		AvailableSequenceNumbers: []uint32{1, 2},
		NotificationMessage: NotificationMessage{SequenceNumber: 2, PublishTime: genT0, NotificationData: []ExtensionObject{
			NewExtensionObject(&DataChangeNotification{MonitoredItems: []MonitoredItemNotification{
				{ClientHandle: 1, Value: DataValue{Value: NewDoubleVariant(1.5), SourceTimestamp: genT0, ServerTimestamp: genT0}},
				{ClientHandle: 2, Value: DataValue{Value: NewInt32Variant(-4), Status: StatusUncertain, SourceTimestamp: genT0}},
				{ClientHandle: 3, Value: DataValue{Value: NewBooleanVariant(true), ServerTimestamp: genT0}},
			}}),
			NewExtensionObject(&EventNotificationList{Events: []EventFieldList{
				{ClientHandle: 9, EventFields: []Variant{NewUInt32Variant(500), NewDateTimeVariant(genT0), NewDoubleVariant(3)}},
			}}),
		}},
		Results: []StatusCode{StatusGood},
	}
}

// genBigPublishResponse is a PublishResponse with n numeric data changes.
func genBigPublishResponse(n int) *PublishResponse {
	dcn := &DataChangeNotification{}
	for i := 0; i < n; i++ {
		dcn.MonitoredItems = append(dcn.MonitoredItems, MonitoredItemNotification{
			ClientHandle: uint32(i),
			Value:        DataValue{Value: NewDoubleVariant(float64(i) * 1.5), SourceTimestamp: genT0, ServerTimestamp: genT0 + 1},
		})
	}
	return &PublishResponse{
		ResponseHeader: ResponseHeader{Timestamp: genT0, RequestHandle: 3},
		SubscriptionID: 7, AvailableSequenceNumbers: []uint32{1},
		NotificationMessage: NotificationMessage{SequenceNumber: 1, PublishTime: genT0, NotificationData: []ExtensionObject{NewExtensionObject(dcn)}},
	}
}

// BenchmarkGenDecodePublishResponse decodes a PublishResponse of 500 data changes
// into a reused response and releases it, as a subscription's receive loop does.
func BenchmarkGenDecodePublishResponse(b *testing.B) {
	buf := genEncode(b, genBigPublishResponse(500))
	var r PublishResponse
	d := NewDecoder(nil, nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		d.Reset(buf, nil)
		if _, err := d.ReadStructure(&r); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}

// BenchmarkGenEncodePublishResponse encodes the same message into a reused buffer.
func BenchmarkGenEncodePublishResponse(b *testing.B) {
	msg := genBigPublishResponse(500)
	e := NewEncoder(make([]byte, 0, 64<<10))
	e.WriteStructure(msg)
	b.ReportAllocs()
	b.SetBytes(int64(e.Len()))
	for b.Loop() {
		e.Reset(e.Bytes())
		e.WriteStructure(msg)
	}
}
