package ua

import "slices"

// Clone returns a deep copy of v: arrays, byte strings and the ExtensionObject,
// DataValue and DiagnosticInfo it points to are copied, so the copy shares nothing
// mutable with v (strings are immutable and shared). Decoded values do not need it
// to outlive a borrowed notification (see Borrowed notifications in the package
// documentation); it is for a copy that is to be modified, or kept apart from a
// value someone else may modify. An ExtensionObject's Value of a registered type is
// copied through its binary encoding; a Value of an unregistered type is shared.
func (v *Variant) Clone() Variant {
	c := *v
	switch x := v.x.(type) {
	case nil, Guid, NodeID, ExpandedNodeID, QualifiedName, LocalizedText:
		// Value types whose strings are immutable.
	case *matrix:
		c.x = &matrix{flat: cloneArray(x.flat), dims: slices.Clone(x.dims)}
	case []byte:
		if v.array {
			c.x = slices.Clone(x)
		} else {
			c.x = cloneBytes(x)
		}
	case *ExtensionObject:
		if x != nil {
			eo := x.Clone()
			c.x = &eo
		}
	case *DataValue:
		if x != nil {
			dv := x.Clone()
			c.x = &dv
		}
	case *DiagnosticInfo:
		c.x = cloneDiagnosticInfo(x)
	default:
		c.x = cloneArray(x)
	}
	return c
}

// Clone returns a deep copy of dv (see Variant.Clone).
func (dv *DataValue) Clone() DataValue {
	c := *dv
	c.Value = dv.Value.Clone()
	return c
}

// Clone returns a deep copy of eo: its Body is copied, and its Value, when of a
// registered type, is encoded and decoded into a new value (taken from the type's
// pool for the pooled notification types: Release it when done). A Value that does
// not encode, or of an unregistered type, is shared.
func (eo *ExtensionObject) Clone() ExtensionObject {
	c := *eo
	c.Body = cloneBytes(eo.Body)
	s, ok := eo.Value.(Structure)
	if !ok {
		return c
	}
	info, ok := TypeByEncodingID(s.BinaryEncodingID())
	if !ok {
		return c
	}
	e := NewEncoder(nil)
	s.Encode(e)
	if e.Err() != nil {
		return c
	}
	nv := info.New()
	d := NewDecoder(e.Bytes(), nil)
	nv.Decode(d)
	if d.Err() != nil {
		return c
	}
	c.Value = nv
	return c
}

func cloneBytes(p []byte) []byte {
	if p == nil {
		return nil
	}
	return append(make([]byte, 0, len(p)), p...)
}

func cloneDiagnosticInfo(di *DiagnosticInfo) *DiagnosticInfo {
	if di == nil {
		return nil
	}
	c := *di
	c.InnerDiagnosticInfo = cloneDiagnosticInfo(di.InnerDiagnosticInfo)
	return &c
}

// cloneArray copies the flat array of an array Variant.
func cloneArray(a any) any {
	switch x := a.(type) {
	case []bool:
		return slices.Clone(x)
	case []int8:
		return slices.Clone(x)
	case []byte:
		return slices.Clone(x)
	case []int16:
		return slices.Clone(x)
	case []uint16:
		return slices.Clone(x)
	case []int32:
		return slices.Clone(x)
	case []uint32:
		return slices.Clone(x)
	case []int64:
		return slices.Clone(x)
	case []uint64:
		return slices.Clone(x)
	case []float32:
		return slices.Clone(x)
	case []float64:
		return slices.Clone(x)
	case []string:
		return slices.Clone(x)
	case []DateTime:
		return slices.Clone(x)
	case []Guid:
		return slices.Clone(x)
	case [][]byte:
		c := slices.Clone(x)
		for i := range c {
			c[i] = cloneBytes(c[i])
		}
		return c
	case []XmlElement:
		return slices.Clone(x)
	case []NodeID:
		return slices.Clone(x)
	case []ExpandedNodeID:
		return slices.Clone(x)
	case []StatusCode:
		return slices.Clone(x)
	case []QualifiedName:
		return slices.Clone(x)
	case []LocalizedText:
		return slices.Clone(x)
	case []ExtensionObject:
		c := slices.Clone(x)
		for i := range c {
			c[i] = x[i].Clone()
		}
		return c
	case []DataValue:
		c := slices.Clone(x)
		for i := range c {
			c[i] = x[i].Clone()
		}
		return c
	case []Variant:
		c := slices.Clone(x)
		for i := range c {
			c[i] = x[i].Clone()
		}
		return c
	case []DiagnosticInfo:
		c := slices.Clone(x)
		for i := range c {
			c[i].InnerDiagnosticInfo = cloneDiagnosticInfo(x[i].InnerDiagnosticInfo)
		}
		return c
	}
	return a
}
