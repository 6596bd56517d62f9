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
// it; the values can: the dispatch loop keeps, in each item's entry of the
// dense item table, the status, source timestamp and a fingerprint of the
// last value it delivered (24 bytes, no map), and after a recovery compares
// the item's notifications with it until the first one that comes in a fresh
// (not republished) message: that one ends the item's window. One identical
// in all three is dropped and counted (SubscriptionStats.Suppressed). An item
// without a source timestamp is never dropped.
//
// Subscription.recoverGen numbers the recoveries; an item whose lastGen is
// behind it is in its window. Both belong to the dispatch loop, which reads
// and writes the items' last* fields under the table's mutex (once per
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
			if it := t.at(h); !it.deleted() {
				dv := &n.Value
				fp := p.fp.of(&dv.Value)
				typ := uint8(dv.Value.Type())
				if dv.Value.IsArray() {
					typ |= 0x80
				}
				if gen != 0 && it.lastGen != gen {
					if fresh {
						it.lastGen = gen
					}
					if it.lastFlags&lastSet != 0 && dv.SourceTimestamp != 0 && it.lastTS == dv.SourceTimestamp &&
						it.lastStatus == dv.Status && it.lastType == typ && it.lastFP == fp {
						sub.stats.suppressed.Add(1)
						continue
					}
				}
				it.lastTS, it.lastStatus, it.lastType, it.lastFP = dv.SourceTimestamp, dv.Status, typ, fp
				it.lastFlags |= lastSet
			}
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
