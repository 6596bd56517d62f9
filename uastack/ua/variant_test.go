package ua

import "testing"

// TestVariantSetRawBits: every inline scalar comes back equal from its type
// and RawBits; any other type gives null and false.
func TestVariantSetRawBits(t *testing.T) {
	var vs []Variant
	for _, set := range []func(*Variant){
		func(v *Variant) { v.SetBoolean(true) }, func(v *Variant) { v.SetSByte(-5) },
		func(v *Variant) { v.SetByte(200) }, func(v *Variant) { v.SetInt16(-30000) },
		func(v *Variant) { v.SetUInt16(60000) }, func(v *Variant) { v.SetInt32(-7) },
		func(v *Variant) { v.SetUInt32(4e9) }, func(v *Variant) { v.SetInt64(-1 << 60) },
		func(v *Variant) { v.SetUInt64(1 << 63) }, func(v *Variant) { v.SetFloat(-1.5) },
		func(v *Variant) { v.SetDouble(3.25) }, func(v *Variant) { v.SetDateTime(Now()) },
		func(v *Variant) { v.SetStatusCode(0x80340000) },
	} {
		var v Variant
		set(&v)
		vs = append(vs, v)
	}
	for _, v := range vs {
		var got Variant
		if !got.SetRawBits(v.Type(), v.RawBits()) || got != v {
			t.Errorf("%v: rebuilt as %v", v.Type(), got.Type())
		}
	}
	var s Variant
	s.SetString("x")
	if s.SetRawBits(TypeString, 1) || s.Type() != TypeNull {
		t.Errorf("a String from raw bits: %v, want null and false", s.Type())
	}
}
