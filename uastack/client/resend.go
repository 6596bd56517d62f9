package client

import (
	"hash/maphash"

	"github.com/uagate/gateway/uastack/ua"
)

// Dropping values a server sends again after a recovery.
//
// Some servers resend every item's last value after ActivateSession or
// TransferSubscriptions, in a new message with a new sequence number
// (node-opcua does on every ActivateSession). The sequence check cannot see
// it; the values can: the dispatch loop keeps, beside each item's entry in
// the dense item table (lastValue, in pages parallel to the items'), the
// status, source timestamp and a fingerprint of the last value it delivered
// (24 bytes, no map), and after a recovery compares
// the item's notifications with it until the first one that comes in a fresh
// (not republished) message: that one ends the item's window. One identical
// in all three is dropped and counted (SubscriptionStats.Suppressed). An item
// without a source timestamp is never dropped.
//
// Subscription.recoverGen numbers the recoveries; an item whose lastValue.gen
// is behind it is in its window. Both belong to the dispatch loop, which reads
// and writes the lastValue entries under the table's mutex (taken once per
// message, not per notification).

// lastSet marks an item whose last* fields hold a delivered value.
const lastSet = 1

// fingerprinter reduces a value to 64 bits: the payload itself for numbers,
// a hash of the text or of the binary encoding otherwise. Dispatch loop only.
type fingerprinter struct {
	seed maphash.Seed
	enc  *ua.Encoder
}

// maxFingerprintBuffer is the encoding buffer kept between values; a larger
// one (a huge array) is let go after use.
const maxFingerprintBuffer = 64 << 10

// inlineType marks the scalar types whose value is the inline payload.
var inlineType = [64]bool{
	ua.TypeBoolean: true, ua.TypeSByte: true, ua.TypeByte: true, ua.TypeInt16: true, ua.TypeUInt16: true,
	ua.TypeInt32: true, ua.TypeUInt32: true, ua.TypeInt64: true, ua.TypeUInt64: true, ua.TypeFloat: true,
	ua.TypeDouble: true, ua.TypeDateTime: true, ua.TypeStatusCode: true,
}

func newFingerprinter() fingerprinter { return fingerprinter{seed: maphash.MakeSeed()} }

func (f *fingerprinter) of(v *ua.Variant) uint64 {
	if !v.IsArray() {
		switch v.Type() {
		case ua.TypeNull:
			return 0
		case ua.TypeBoolean, ua.TypeSByte, ua.TypeByte, ua.TypeInt16, ua.TypeUInt16, ua.TypeInt32, ua.TypeUInt32,
			ua.TypeInt64, ua.TypeUInt64, ua.TypeFloat, ua.TypeDouble, ua.TypeDateTime, ua.TypeStatusCode:
			return v.RawBits()
		case ua.TypeString, ua.TypeXmlElement:
			return maphash.String(f.seed, v.Str())
		}
	}
	if f.enc == nil {
		f.enc = ua.NewEncoder(make([]byte, 0, 256))
	}
	f.enc.Reset(f.enc.Bytes())
	f.enc.WriteVariant(v)
	h := maphash.Bytes(f.seed, f.enc.Bytes())
	if cap(f.enc.Bytes()) > maxFingerprintBuffer {
		f.enc = nil
	}
	return h
}

// dropResent records the last value of each item in items and, in an item's
// window after a recovery, drops a notification that repeats it; it returns
// the notifications to deliver (items compacted in place, order kept; the
// dropped ones move behind them and are released with the rest). fresh is
// false for a republished message.
func (p *publisher) dropResent(sub *Subscription, items []ua.MonitoredItemNotification, fresh bool) []ua.MonitoredItemNotification {
	t := &sub.items
	gen := sub.recoverGen
	k := 0
	t.mu.Lock()
	for i := range items {
		n := &items[i]
		if h := n.ClientHandle; t.valid(h) {
			lv := t.lastOf(h)
			dv := &n.Value
			typ := uint8(dv.Value.Type())
			var fp uint64
			switch {
			case dv.Value.IsArray():
				typ |= 0x80
				fp = p.fp.of(&dv.Value)
			case inlineType[typ&0x3f]:
				fp = dv.Value.RawBits() // the common case, without a call
			default:
				fp = p.fp.of(&dv.Value)
			}
			if gen != 0 && lv.gen != gen {
				if fresh {
					lv.gen = gen
				}
				if lv.flags&lastSet != 0 && dv.SourceTimestamp != 0 && lv.ts == dv.SourceTimestamp &&
					lv.status == dv.Status && lv.typ == typ && lv.fp == fp {
					sub.stats.suppressed.Add(1)
					continue
				}
			}
			lv.ts, lv.status, lv.typ, lv.fp = dv.SourceTimestamp, dv.Status, typ, fp
			lv.flags |= lastSet
		}
		if k != i {
			items[k], items[i] = items[i], items[k]
		}
		k++
	}
	t.mu.Unlock()
	return items[:k]
}

// armResend opens every item's window: a recovery (reactivation or transfer)
// has just happened. Dispatch loop only.
func (s *Subscription) armResend() {
	s.recoverGen++
	if s.recoverGen == 0 { // wrapped: 0 means never
		s.recoverGen = 1
	}
}
