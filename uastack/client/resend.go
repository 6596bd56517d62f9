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
// source timestamp of the last value it delivered and a 64-bit digest of
// that value with its type and status (16 bytes, no map). A recovery opens
// every item's window (armResend sets lastOpen on each); until the item's
// first notification in a fresh (not republished) message, which closes it,
// a notification with the same source timestamp and digest is dropped and
// counted (SubscriptionStats.Suppressed). An item without a source timestamp
// is never dropped.
//
// The digest is exact where it matters in practice: for a number it is a
// bijection of its bits once the type and status are fixed, so two numbers
// that differ in only one of value, type or status never match (a text,
// array or structure is first hashed to a 64-bit fingerprint). Two
// that differ in value and in status or type at once match with probability
// 2⁻⁶⁴, and only with equal source timestamps inside a window.
//
// The dispatch loop reads and writes the lastValue entries under the
// table's mutex (taken once per message, not per notification).

const (
	lastOpen = 1 << 63      // lastValue.ts: the item is in a recovery window
	lastTS   = lastOpen - 1 // lastValue.ts: the timestamp's bits
)

// digest combines a value's fingerprint with its type (and array flag) and
// status: the tag is spread by an odd multiplier (injective on its 40 bits)
// and the sum mixed by a bijective finaliser (murmur3's fmix64).
func digest(fp uint64, typ uint8, st ua.StatusCode) uint64 {
	h := fp ^ (uint64(st)<<8|uint64(typ))*0x9e3779b97f4a7c15
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

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
			d := digest(fp, typ, dv.Status)
			ts := uint64(dv.SourceTimestamp) & lastTS
			if lv.ts&lastOpen != 0 {
				if fresh {
					lv.ts &^= lastOpen
				}
				if ts != 0 && lv.ts&lastTS == ts && lv.fp == d {
					sub.stats.suppressed.Add(1)
					continue
				}
			}
			lv.ts, lv.fp = ts|lv.ts&lastOpen, d
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
// has just happened. Dispatch loop only; one pass over the last values
// (about a millisecond per million items).
func (s *Subscription) armResend() {
	t := &s.items
	t.mu.Lock()
	for _, pg := range t.last {
		for i := range pg {
			pg[i].ts |= lastOpen
		}
	}
	t.mu.Unlock()
}
