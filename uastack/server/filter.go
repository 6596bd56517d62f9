package server

import (
	"github.com/uagate/gateway/uastack/ua"
)

// changed applies the DataChangeFilter: dv against the last value queued.
// Values compare as ua.Variant.Equal says (NaN staying NaN, or 0 becoming -0,
// is no change), deadbands as ua.ExceedsDeadband does (a percent deadband was
// turned into absDB, in the value's units, when the item was made). An inline
// scalar whose bits did not move is settled without rebuilding the last value:
// that is the common case of a sweep over many items.
func (it *monitoredItem) changed(dv *ua.DataValue) bool {
	if dv.Status != it.lastStatus {
		return true
	}
	if it.trigger == ua.DataChangeTriggerStatus {
		return false
	}
	if it.valueChanged(&dv.Value) {
		return true
	}
	return it.trigger == ua.DataChangeTriggerStatusValueTimestamp &&
		(dv.SourceTimestamp != it.lastSrc || dv.SourcePicoseconds != it.lastSrcPs)
}

// valueChanged reports whether v differs from the last value queued as the
// item's deadband wants.
func (it *monitoredItem) valueChanged(v *ua.Variant) bool {
	var last ua.Variant
	if it.lastInline {
		if t := v.Type(); t == it.lastType && isInline(v) {
			if v.RawBits() == it.lastBits {
				return false
			}
			// Other bits are another value, but for the zeros and NaNs of
			// the floating-point types.
			if it.deadband == ua.DeadbandTypeNone && t != ua.TypeFloat && t != ua.TypeDouble {
				return true
			}
		}
		last = variantFromBits(it.lastType, it.lastBits)
	} else {
		last = it.last.Value
	}
	if it.deadband == ua.DeadbandTypeNone {
		return !last.Equal(v)
	}
	return ua.ExceedsDeadband(&last, v, ua.DeadbandTypeAbsolute, it.absDB, 0, 0)
}
