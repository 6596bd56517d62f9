package ua

// Ownership of decoded notifications.
//
// DataChangeNotification, MonitoredItemNotification, EventFieldList and
// EventNotificationList come from bounded pools (pooled_gen.go). When a
// PublishResponse (or RepublishResponse) is decoded, every DataChangeNotification and
// EventNotificationList in NotificationMessage.NotificationData is taken from its pool
// by the ExtensionObject decoder, or decoded into the one the same ExtensionObject
// already holds when the response object is reused.
//
// The response owns those objects. Whoever owns the response releases them all with
// PublishResponse.Release once done with them (typically in a defer after the
// handlers have returned); afterwards neither the notifications nor anything taken
// from them (slices, Variant strings and arrays) may be used, and the response may be
// decoded again. Do not Release a notification that is still held by the response's
// ExtensionObject: the next decode into the response would write into an object the
// pool may already have handed to someone else. To keep one notification beyond the
// response's Release, detach it first,
//
//	dcn := eo.Value.(*ua.DataChangeNotification)
//	eo.Value = nil // the response no longer owns dcn
//
// and Release it separately when done.

// Release gives back to their pools the notifications decoded into the message,
// clearing their ExtensionObjects. The NotificationData slice keeps its capacity
// (its spare capacity is always zero: see Grow).
func (m *NotificationMessage) Release() {
	for i := range m.NotificationData {
		m.NotificationData[i].Release()
	}
	m.NotificationData = m.NotificationData[:0]
}

// Release gives the pooled notifications of r back (see NotificationMessage.Release)
// so that r can be decoded into again. The caller must not use them afterwards.
func (r *PublishResponse) Release() { r.NotificationMessage.Release() }

// Release gives the pooled notifications of r back (see NotificationMessage.Release)
// so that r can be decoded into again. The caller must not use them afterwards.
func (r *RepublishResponse) Release() { r.NotificationMessage.Release() }
