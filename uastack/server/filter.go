package server

import (
	"bytes"
	"math"
	"reflect"

	"github.com/uagate/gateway/uastack/ua"
)

// changed applies the DataChangeFilter: dv against the last value queued.
func (it *monitoredItem) changed(dv *ua.DataValue) bool {
	if dv.Status != it.lastStatus {
		return true
	}
	if it.trigger == ua.DataChangeTriggerStatus {
		return false
	}
	inline := it.lastInline && isInline(&dv.Value)
	switch {
	case it.deadband != ua.DeadbandTypeNone && inline:
		x, ok1 := dv.Value.AsFloat64()
		last := variantFromBits(it.lastType, it.lastBits)
		y, ok2 := last.AsFloat64()
		if !ok1 || !ok2 {
			if dv.Value.Type() != it.lastType || dv.Value.RawBits() != it.lastBits {
				return true
			}
		} else if math.Abs(x-y) > it.absDB {
			return true
		}
	case it.deadband != ua.DeadbandTypeNone:
		last := it.lastValue()
		if exceeds(&last.Value, &dv.Value, it.absDB) {
			return true
		}
	case inline:
		if dv.Value.Type() != it.lastType || dv.Value.RawBits() != it.lastBits {
			return true
		}
	default:
		last := it.lastValue()
		if !variantEqual(&last.Value, &dv.Value) {
			return true
		}
	}
	return it.trigger == ua.DataChangeTriggerStatusValueTimestamp &&
		(dv.SourceTimestamp != it.lastSrc || dv.SourcePicoseconds != it.lastSrcPs)
}

// variantEqual compares two values without allocating for scalars.
func variantEqual(a, b *ua.Variant) bool {
	if a.Type() != b.Type() || a.IsArray() != b.IsArray() {
		return false
	}
	if !a.IsArray() {
		switch a.Type() {
		case ua.TypeNull:
			return true
		case ua.TypeString, ua.TypeXmlElement:
			return a.Str() == b.Str()
		}
		if inlineType(a.Type()) {
			return a.RawBits() == b.RawBits()
		}
		if x, ok := a.Value().([]byte); ok {
			y, _ := b.Value().([]byte)
			return bytes.Equal(x, y)
		}
	}
	return reflect.DeepEqual(a.Value(), b.Value()) && reflect.DeepEqual(a.ArrayDimensions(), b.ArrayDimensions())
}

// exceeds reports whether a numeric value moved by more than db from the last;
// arrays move when any element does or their length changed. Values that are
// not numbers compare by equality.
func exceeds(last, v *ua.Variant, db float64) bool {
	if !v.IsArray() {
		x, ok1 := v.AsFloat64()
		y, ok2 := last.AsFloat64()
		if !ok1 || !ok2 {
			return !variantEqual(last, v)
		}
		return math.Abs(x-y) > db
	}
	xs, ok1 := floats(v)
	ys, ok2 := floats(last)
	if !ok1 || !ok2 || len(xs) != len(ys) {
		return !variantEqual(last, v)
	}
	for i := range xs {
		if math.Abs(xs[i]-ys[i]) > db {
			return true
		}
	}
	return false
}

// floats converts a numeric array to float64 (for deadbands; not on the hot
// path of scalar items).
func floats(v *ua.Variant) ([]float64, bool) {
	rv := reflect.ValueOf(v.Value())
	if rv.Kind() != reflect.Slice {
		return nil, false
	}
	out := make([]float64, rv.Len())
	for i := range out {
		e := rv.Index(i)
		switch e.Kind() {
		case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out[i] = float64(e.Int())
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out[i] = float64(e.Uint())
		case reflect.Float32, reflect.Float64:
			out[i] = e.Float()
		default:
			return nil, false
		}
	}
	return out, true
}
