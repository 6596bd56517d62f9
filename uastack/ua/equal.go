package ua

import (
	"bytes"
	"math"
	"slices"
)

// Equal reports whether v and o hold the same value: the same built-in type, both
// scalars or both arrays with the same dimensions, and equal elements, compared
// deeply (the Variants of a Variant array, the parts of a DataValue or
// DiagnosticInfo). It does not allocate for scalars and built-in arrays.
//
// Float and Double compare as numbers, with one exception: NaN equals NaN (of any
// payload), so that a value that stays NaN is not a change; 0 and -0 are equal.
// A null ByteString equals an empty one only if both are null or both are empty.
// ExtensionObjects are equal when they have the same type id and encoding and their
// bodies encode to the same bytes (which allocates).
func (v *Variant) Equal(o *Variant) bool {
	if v.typ != o.typ || v.array != o.array {
		return false
	}
	if !v.array {
		return scalarEqual(v, o)
	}
	if !slices.Equal(v.ArrayDimensions(), o.ArrayDimensions()) {
		return false
	}
	return arrayEqual(v.arrayValue(), o.arrayValue())
}

func scalarEqual(v, o *Variant) bool {
	switch v.typ {
	case TypeNull:
		return true
	case TypeFloat:
		return floatEqual(float64(math.Float32frombits(uint32(v.n))), float64(math.Float32frombits(uint32(o.n))))
	case TypeDouble:
		return floatEqual(math.Float64frombits(v.n), math.Float64frombits(o.n))
	case TypeString, TypeXmlElement:
		return v.s == o.s
	}
	if fixedScalarSize[v.typ] != 0 {
		return v.n == o.n
	}
	switch x := v.x.(type) {
	case Guid:
		y, ok := o.x.(Guid)
		return ok && x == y
	case []byte:
		y, ok := o.x.([]byte)
		return ok && byteStringEqual(x, y)
	case NodeID:
		y, ok := o.x.(NodeID)
		return ok && x == y
	case ExpandedNodeID:
		y, ok := o.x.(ExpandedNodeID)
		return ok && x == y
	case QualifiedName:
		y, ok := o.x.(QualifiedName)
		return ok && x == y
	case LocalizedText:
		y, ok := o.x.(LocalizedText)
		return ok && x == y
	case *ExtensionObject:
		y, ok := o.x.(*ExtensionObject)
		return ok && extensionObjectEqual(x, y)
	case *DataValue:
		y, ok := o.x.(*DataValue)
		return ok && (x == y || x != nil && y != nil && x.Equal(y))
	case *DiagnosticInfo:
		y, ok := o.x.(*DiagnosticInfo)
		return ok && diagnosticInfoEqual(x, y)
	}
	return v.x == nil && o.x == nil
}

// floatEqual is == except that NaN equals NaN.
func floatEqual(a, b float64) bool { return a == b || a != a && b != b }

func byteStringEqual(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func arrayEqual(a, b any) bool {
	switch x := a.(type) {
	case []bool:
		return eqSlice(x, b)
	case []int8:
		return eqSlice(x, b)
	case []byte:
		return eqSlice(x, b)
	case []int16:
		return eqSlice(x, b)
	case []uint16:
		return eqSlice(x, b)
	case []int32:
		return eqSlice(x, b)
	case []uint32:
		return eqSlice(x, b)
	case []int64:
		return eqSlice(x, b)
	case []uint64:
		return eqSlice(x, b)
	case []float32:
		y, ok := b.([]float32)
		return ok && slices.EqualFunc(x, y, func(p, q float32) bool { return floatEqual(float64(p), float64(q)) })
	case []float64:
		y, ok := b.([]float64)
		return ok && slices.EqualFunc(x, y, floatEqual)
	case []string:
		return eqSlice(x, b)
	case []DateTime:
		return eqSlice(x, b)
	case []Guid:
		return eqSlice(x, b)
	case [][]byte:
		y, ok := b.([][]byte)
		return ok && slices.EqualFunc(x, y, byteStringEqual)
	case []XmlElement:
		return eqSlice(x, b)
	case []NodeID:
		return eqSlice(x, b)
	case []ExpandedNodeID:
		return eqSlice(x, b)
	case []StatusCode:
		return eqSlice(x, b)
	case []QualifiedName:
		return eqSlice(x, b)
	case []LocalizedText:
		return eqSlice(x, b)
	case []ExtensionObject:
		y, ok := b.([]ExtensionObject)
		return ok && eqSlicePtr(x, y, extensionObjectEqual)
	case []DataValue:
		y, ok := b.([]DataValue)
		return ok && eqSlicePtr(x, y, (*DataValue).Equal)
	case []Variant:
		y, ok := b.([]Variant)
		return ok && eqSlicePtr(x, y, (*Variant).Equal)
	case []DiagnosticInfo:
		y, ok := b.([]DiagnosticInfo)
		return ok && eqSlicePtr(x, y, diagnosticInfoEqual)
	}
	return a == nil && b == nil
}

func eqSlice[T comparable](x []T, b any) bool {
	y, ok := b.([]T)
	return ok && slices.Equal(x, y)
}

func eqSlicePtr[T any](x, y []T, eq func(a, b *T) bool) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if !eq(&x[i], &y[i]) {
			return false
		}
	}
	return true
}

// Equal reports whether dv and o have equal values (Variant.Equal), status codes
// and timestamps.
func (dv *DataValue) Equal(o *DataValue) bool {
	return dv.Status == o.Status && dv.SourceTimestamp == o.SourceTimestamp &&
		dv.ServerTimestamp == o.ServerTimestamp && dv.SourcePicoseconds == o.SourcePicoseconds &&
		dv.ServerPicoseconds == o.ServerPicoseconds && dv.Value.Equal(&o.Value)
}

func diagnosticInfoEqual(a, b *DiagnosticInfo) bool {
	for a != nil && b != nil {
		if a.Mask&^DiagHasInnerDiagnosticInfo != b.Mask&^DiagHasInnerDiagnosticInfo ||
			a.SymbolicID != b.SymbolicID || a.NamespaceURI != b.NamespaceURI || a.Locale != b.Locale ||
			a.LocalizedText != b.LocalizedText || a.AdditionalInfo != b.AdditionalInfo ||
			a.InnerStatusCode != b.InnerStatusCode {
			return false
		}
		a, b = a.InnerDiagnosticInfo, b.InnerDiagnosticInfo
	}
	return a == nil && b == nil
}

func extensionObjectEqual(a, b *ExtensionObject) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.TypeID != b.TypeID || a.Encoding != b.Encoding || (a.Value == nil) != (b.Value == nil) {
		return false
	}
	if a.Value == nil {
		return byteStringEqual(a.Body, b.Body)
	}
	ea, eb := NewEncoder(nil), NewEncoder(nil)
	a.Value.Encode(ea)
	b.Value.Encode(eb)
	return ea.Err() == nil && eb.Err() == nil && bytes.Equal(ea.Bytes(), eb.Bytes())
}

// ExceedsDeadband reports whether cur is a change from last that passes a
// DataChangeFilter's deadband (Part 4 §7.22.2):
//
//   - DeadbandTypeNone: any change (!last.Equal(cur)).
//   - DeadbandTypeAbsolute: |cur − last| > value.
//   - DeadbandTypePercent: |cur − last| > value/100 × |rangeHigh − rangeLow|, the
//     item's EURange.
//
// Both must be numeric (the integer types, Float, Double; Boolean counts as 0/1)
// for the deadband to apply; otherwise, and when the types differ, a value is a
// change when it is not Equal. Arrays (and matrices) of the same type and
// dimensions exceed the deadband when any element does; of different lengths they
// are a change. NaN: a value becoming or ceasing to be NaN is a change, NaN staying
// NaN is not. It does not allocate.
func ExceedsDeadband(last, cur *Variant, kind DeadbandType, value, rangeLow, rangeHigh float64) bool {
	var db float64
	switch kind {
	case DeadbandTypeAbsolute:
		db = value
	case DeadbandTypePercent:
		db = value / 100 * math.Abs(rangeHigh-rangeLow)
	default:
		return !last.Equal(cur)
	}
	if last.typ != cur.typ || last.array != cur.array {
		return true
	}
	if !cur.array {
		x, ok1 := cur.AsFloat64()
		y, ok2 := last.AsFloat64()
		if !ok1 || !ok2 {
			return !last.Equal(cur)
		}
		return beyond(x, y, db)
	}
	if !slices.Equal(last.ArrayDimensions(), cur.ArrayDimensions()) {
		return true
	}
	a, b := cur.arrayValue(), last.arrayValue()
	switch x := a.(type) {
	case []bool:
		return arrayBeyond(x, b, db, func(v bool) float64 {
			if v {
				return 1
			}
			return 0
		})
	case []int8:
		return arrayBeyond(x, b, db, func(v int8) float64 { return float64(v) })
	case []byte:
		return arrayBeyond(x, b, db, func(v byte) float64 { return float64(v) })
	case []int16:
		return arrayBeyond(x, b, db, func(v int16) float64 { return float64(v) })
	case []uint16:
		return arrayBeyond(x, b, db, func(v uint16) float64 { return float64(v) })
	case []int32:
		return arrayBeyond(x, b, db, func(v int32) float64 { return float64(v) })
	case []uint32:
		return arrayBeyond(x, b, db, func(v uint32) float64 { return float64(v) })
	case []int64:
		return arrayBeyond(x, b, db, func(v int64) float64 { return float64(v) })
	case []uint64:
		return arrayBeyond(x, b, db, func(v uint64) float64 { return float64(v) })
	case []float32:
		return arrayBeyond(x, b, db, func(v float32) float64 { return float64(v) })
	case []float64:
		return arrayBeyond(x, b, db, func(v float64) float64 { return v })
	}
	return !last.Equal(cur)
}

// beyond reports whether x moved from y by more than db.
func beyond(x, y, db float64) bool {
	if x != x || y != y { // NaN
		return (x != x) != (y != y)
	}
	return math.Abs(x-y) > db
}

func arrayBeyond[T any](x []T, other any, db float64, f func(T) float64) bool {
	y, ok := other.([]T)
	if !ok || len(x) != len(y) {
		return true
	}
	for i := range x {
		if beyond(f(x[i]), f(y[i]), db) {
			return true
		}
	}
	return false
}
