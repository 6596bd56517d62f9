package server

import (
	"github.com/uagate/gateway/uastack/ua"
)

// collect moves queued notifications into a new retained message, within
// budget bytes and the subscription's MaxNotificationsPerPublish (mu held).
// It returns nil when nothing was queued after all.
func (sub *subscription) collect(now ua.DateTime, budget int) (*retained, int, bool) {
	var dcn *ua.DataChangeNotification
	var enl *ua.EventNotificationList
	size, count, limit := 0, 0, int(sub.maxNotif)
	k := 0
	for ; k < len(sub.pending); k++ {
		it := sub.pending[k]
		if it.removed || it.mode != ua.MonitoringModeReporting {
			it.queued = false
			continue
		}
		for it.tq.n > 0 {
			e := it.tq.front()
			var dv ua.DataValue
			it.gen.sample(e.tick, &dv)
			dv.ServerTimestamp = e.srv
			it.stripTimestamps(&dv)
			if e.ovf {
				dv.Status |= overflowBits
			}
			sz := 4 + sub.dataValueSize(&dv)
			if count >= limit || (count > 0 && size+sz > budget) {
				break
			}
			if dcn == nil {
				dcn = ua.NewDataChangeNotification()
			}
			dcn.MonitoredItems = append(dcn.MonitoredItems, ua.MonitoredItemNotification{ClientHandle: it.clientHandle, Value: dv})
			it.tq.pop()
			size += sz
			count++
		}
		for it.dq.n > 0 {
			dv := &it.dq.front().dv
			sz := 4 + sub.dataValueSize(dv)
			if count >= limit || (count > 0 && size+sz > budget) {
				break
			}
			if dcn == nil {
				dcn = ua.NewDataChangeNotification()
			}
			dcn.MonitoredItems = append(dcn.MonitoredItems, ua.MonitoredItemNotification{ClientHandle: it.clientHandle, Value: *dv})
			it.dq.pop()
			size += sz
			count++
		}
		for it.evLn > 0 {
			ev := &it.evq[it.evHead]
			sz := 8 + sub.fieldsSize(ev.EventFields)
			if count >= limit || (count > 0 && size+sz > budget) {
				break
			}
			if enl == nil {
				enl = ua.NewEventNotificationList()
			}
			enl.Events = append(enl.Events, *ev)
			*ev = ua.EventFieldList{}
			it.evHead = (it.evHead + 1) % len(it.evq)
			it.evLn--
			size += sz
			count++
		}
		if it.queuedValues() > 0 || it.evLn > 0 {
			break
		}
		it.queued = false
	}
	n := copy(sub.pending, sub.pending[k:])
	clear(sub.pending[n:])
	sub.pending = sub.pending[:n]
	if count == 0 {
		return nil, 0, len(sub.pending) > 0
	}
	r := retainedPool.Get()
	r.refs.Store(1) // the retransmission queue's
	r.msg.SequenceNumber = sub.nextSeq()
	r.msg.PublishTime = now
	if dcn != nil {
		r.msg.NotificationData = append(r.msg.NotificationData, ua.NewExtensionObject(dcn))
	}
	if enl != nil {
		r.msg.NotificationData = append(r.msg.NotificationData, ua.NewExtensionObject(enl))
	}
	return r, count, len(sub.pending) > 0
}

// dataValueSize is the encoded size of dv.
func (sub *subscription) dataValueSize(dv *ua.DataValue) int {
	n := 1
	if !dv.Value.IsNull() {
		n += sub.variantSize(&dv.Value)
	}
	if dv.Status != 0 {
		n += 4
	}
	if dv.SourceTimestamp != 0 {
		n += 8
	}
	if dv.ServerTimestamp != 0 {
		n += 8
	}
	if dv.SourcePicoseconds != 0 {
		n += 2
	}
	if dv.ServerPicoseconds != 0 {
		n += 2
	}
	return n
}

func (sub *subscription) fieldsSize(fields []ua.Variant) int {
	n := 0
	for i := range fields {
		n += sub.variantSize(&fields[i])
	}
	return n
}

var fixedSize = [32]int{ua.TypeBoolean: 1, ua.TypeSByte: 1, ua.TypeByte: 1, ua.TypeInt16: 2, ua.TypeUInt16: 2,
	ua.TypeInt32: 4, ua.TypeUInt32: 4, ua.TypeInt64: 8, ua.TypeUInt64: 8, ua.TypeFloat: 4, ua.TypeDouble: 8,
	ua.TypeDateTime: 8, ua.TypeStatusCode: 4}

// variantSize is the encoded size of v: computed for scalars, measured by
// encoding for the rest.
func (sub *subscription) variantSize(v *ua.Variant) int {
	if !v.IsArray() {
		switch t := v.Type(); {
		case t == ua.TypeNull:
			return 1
		case t == ua.TypeString || t == ua.TypeXmlElement:
			return 5 + len(v.Str())
		case int(t) < len(fixedSize) && fixedSize[t] > 0:
			return 1 + fixedSize[t]
		}
	}
	sub.scratch.Reset(sub.scratchB[:0])
	sub.scratch.WriteVariant(v)
	n := sub.scratch.Len()
	if b := sub.scratch.Bytes(); cap(b) <= 1<<20 {
		sub.scratchB = b[:0]
	}
	return n
}
