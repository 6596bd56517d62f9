package ua

import (
	"testing"
)

// seedFuzz adds every built-in case and its truncations as seeds.
func seedFuzz(f *testing.F) {
	for _, c := range builtinCases {
		e := NewEncoder(nil)
		encodeValue(e, c.value)
		b := e.Bytes()
		for n := 0; n <= len(b); n++ {
			f.Add(append([]byte(nil), b[:n]...))
		}
	}
}

// FuzzDecodeBuiltins feeds arbitrary bytes to every built-in decoder: they must
// return (an error or a value) without panicking, and whatever decodes must encode
// and decode again to the same bytes.
func FuzzDecodeBuiltins(f *testing.F) {
	seedFuzz(f)
	lim := DefaultLimits
	lim.MaxArrayLength = 1 << 12
	lim.MaxStringLength = 1 << 12
	lim.MaxByteStringLength = 1 << 12
	f.Fuzz(func(t *testing.T, b []byte) {
		var v Variant
		d := NewDecoder(b, &lim)
		d.ReadVariant(&v)
		if d.Err() == nil {
			e := NewEncoder(nil)
			e.WriteVariant(&v)
			if e.Err() != nil {
				t.Fatalf("decoded Variant does not encode: %v", e.Err())
			}
			var v2 Variant
			d2 := NewDecoder(e.Bytes(), &lim)
			d2.ReadVariant(&v2)
			if d2.Err() != nil {
				t.Fatalf("re-encoded Variant does not decode: %v", d2.Err())
			}
		}
		var dv DataValue
		d.Reset(b, &lim)
		d.ReadDataValue(&dv)
		var eo ExtensionObject
		d.Reset(b, &lim)
		d.ReadExtensionObject(&eo)
		var di DiagnosticInfo
		d.Reset(b, &lim)
		d.ReadDiagnosticInfo(&di)
		d.Reset(b, &lim)
		d.ReadExpandedNodeID()
		d.ReadLocalizedText()
		d.ReadQualifiedName()
		d.Reset(b, &lim)
		_, _ = d.ReadStructure(nil)
	})
}
