package jsonenc

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

var decodableModes = []Mode{Compact, Verbose, Reversible104}

func testDecoder() *Decoder {
	return NewDecoder(DecoderOptions{NamespaceURIs: testNamespaces, ServerURIs: testServers})
}

func encVariant(mode Mode, v *ua.Variant) string {
	return encodeWith(mode, func(e *Encoder) { e.WriteVariant(v) })
}

// lossy lists the cases whose decoded value differs by design.
var lossy = map[string]bool{
	"String.invalidUTF8": true, // replaced by U+FFFD
	"DiagnosticInfo":     true, // the decoder sets the InnerDiagnosticInfo mask bit
}

func TestRoundTripCases(t *testing.T) {
	d := testDecoder()
	for _, mode := range decodableModes {
		for _, c := range variantCases() {
			v := c.v
			js := encVariant(mode, &v)
			got, err := d.DecodeVariant([]byte(js))
			if err != nil {
				t.Errorf("%s %s: decode %s: %v", mode, c.name, js, err)
				continue
			}
			if again := encVariant(mode, &got); again != js && !lossy[c.name] {
				t.Errorf("%s %s: re-encoded\n %s\nwant\n %s", mode, c.name, again, js)
			}
			if !lossy[c.name] && !hasNaN(&v) && !reflect.DeepEqual(normalize(got), normalize(v)) {
				t.Errorf("%s %s: decoded %#v, want %#v", mode, c.name, got, v)
			}
		}
	}
}

// TestDecodeNonReversibleTyped decodes NonReversible104 and collapsed bodies
// with the type supplied, as a subscriber with metadata does.
func TestDecodeNonReversibleTyped(t *testing.T) {
	d := testDecoder()
	for _, c := range variantCases() {
		v := c.v
		if lossy[c.name] || v.Type() == ua.TypeExtensionObject || v.Type() == ua.TypeDiagnosticInfo ||
			v.Type() == ua.TypeLocalizedText || v.Type() == ua.TypeVariant || v.Type() == ua.TypeDataValue {
			continue // NonReversible drops information for these
		}
		for _, mode := range []Mode{NonReversible104, Verbose} {
			js := encodeWith(mode, func(e *Encoder) { e.WriteVariantBody(&v) })
			got, err := d.DecodeValue([]byte(js), v.Type(), v.IsArray())
			if err != nil {
				t.Errorf("%s %s: %s: %v", mode, c.name, js, err)
				continue
			}
			if again := encodeWith(mode, func(e *Encoder) { e.WriteVariantBody(&got) }); again != js {
				t.Errorf("%s %s: re-encoded %s want %s", mode, c.name, again, js)
			}
		}
	}
}

func hasNaN(v *ua.Variant) bool {
	switch x := v.Value().(type) {
	case float32:
		return x != x
	case float64:
		return x != x
	case []float64:
		for _, f := range x {
			if f != f {
				return true
			}
		}
	case []float32:
		for _, f := range x {
			if f != f {
				return true
			}
		}
	}
	return false
}

// normalize maps equivalent representations together for DeepEqual.
func normalize(v ua.Variant) ua.Variant {
	if dv, ok := v.Value().(*ua.DataValue); ok && !v.IsArray() {
		c := *dv
		if c.SourceTimestamp == 0 {
			c.SourcePicoseconds = 0
		}
		if c.ServerTimestamp == 0 {
			c.ServerPicoseconds = 0
		}
		return ua.MustVariant(&c)
	}
	return v
}

// randVariant returns a random Variant of a random type (scalar, array or
// matrix) without NaNs and with valid UTF-8, so that it must round-trip exactly.
func randVariant(r *rand.Rand, depth int) ua.Variant {
	t := ua.TypeID(1 + r.IntN(21)) // Boolean … LocalizedText
	if t == ua.TypeExtensionObject-1+1 {
		t = ua.TypeDouble
	}
	arrayKind := r.IntN(4) // 0,1: scalar; 2: array; 3: matrix
	n := 1
	var dims []int32
	switch arrayKind {
	case 2:
		n = r.IntN(5)
	case 3:
		dims = []int32{int32(1 + r.IntN(3)), int32(1 + r.IntN(3))}
		n = int(dims[0] * dims[1])
	}
	vals := make([]ua.Variant, n)
	for i := range vals {
		vals[i] = randScalar(r, t)
	}
	if arrayKind < 2 {
		if depth < 2 && r.IntN(8) == 0 {
			inner := randVariant(r, depth+1)
			dv := ua.DataValue{Value: inner, Status: ua.StatusCode(r.Uint32() & 0xC0FF0000)}
			if r.IntN(2) == 0 {
				dv.SourceTimestamp = randTime(r)
				dv.SourcePicoseconds = uint16(r.IntN(10000))
			}
			if r.IntN(2) == 0 {
				dv.ServerTimestamp = randTime(r)
			}
			return normalize(ua.MustVariant(&dv))
		}
		return vals[0]
	}
	flat := buildArray(t, vals)
	if dims != nil {
		m, err := ua.NewMatrixVariant(flat, dims)
		if err != nil {
			panic(err)
		}
		return m
	}
	return ua.MustVariant(flat)
}

func randTime(r *rand.Rand) ua.DateTime {
	return ua.DateTime(1 + r.Int64N(maxTicks-1))
}

func randString(r *rand.Rand) string {
	const alphabet = "aZ09 ;=:\"\\/\n\t\x01ÄÖ€😀\u2028"
	runes := []rune(alphabet)
	var b strings.Builder
	for i := r.IntN(8); i > 0; i-- {
		b.WriteRune(runes[r.IntN(len(runes))])
	}
	return b.String()
}

func randScalar(r *rand.Rand, t ua.TypeID) ua.Variant {
	var v ua.Variant
	switch t {
	case ua.TypeBoolean:
		v.SetBoolean(r.IntN(2) == 0)
	case ua.TypeSByte:
		v.SetSByte(int8(r.Uint32()))
	case ua.TypeByte:
		v.SetByte(byte(r.Uint32()))
	case ua.TypeInt16:
		v.SetInt16(int16(r.Uint32()))
	case ua.TypeUInt16:
		v.SetUInt16(uint16(r.Uint32()))
	case ua.TypeInt32:
		v.SetInt32(int32(r.Uint32()))
	case ua.TypeUInt32:
		v.SetUInt32(r.Uint32())
	case ua.TypeInt64:
		v.SetInt64(int64(r.Uint64()))
	case ua.TypeUInt64:
		v.SetUInt64(r.Uint64())
	case ua.TypeFloat:
		v.SetFloat(math.Float32frombits(r.Uint32()&^0x7f800000 | uint32(r.IntN(254)+1)<<23))
	case ua.TypeDouble:
		v.SetDouble(math.Float64frombits(r.Uint64()&^(0x7ff<<52) | uint64(r.IntN(2046)+1)<<52))
	case ua.TypeString:
		v.SetString(randString(r))
	case ua.TypeDateTime:
		v.SetDateTime(randTime(r))
	case ua.TypeGuid:
		v = ua.MustVariant(ua.Guid{Data1: r.Uint32(), Data2: uint16(r.Uint32()), Data3: 1})
	case ua.TypeByteString:
		p := make([]byte, r.IntN(6))
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		v = ua.MustVariant(p)
	case ua.TypeXmlElement:
		v.SetXmlElement(ua.XmlElement("<a>" + randString(r) + "</a>"))
	case ua.TypeNodeID:
		ids := []ua.NodeID{ua.NewNumericNodeID(uint16(r.IntN(4)), r.Uint32()|1), ua.NewStringNodeID(uint16(r.IntN(9)), randString(r)+"x"),
			ua.NewGuidNodeID(1, ua.Guid{Data1: r.Uint32() | 1}), ua.NewOpaqueNodeID(2, []byte{byte(r.Uint32()), 1})}
		v = ua.MustVariant(ids[r.IntN(len(ids))])
	case ua.TypeExpandedNodeID:
		x := ua.ExpandedNodeID{NodeID: ua.NewNumericNodeID(0, r.Uint32()|1)}
		switch r.IntN(3) {
		case 0:
			x.NamespaceURI = "urn:other"
		case 1:
			x.NamespaceURI, x.ServerIndex = "urn:a", uint32(1+r.IntN(4))
		}
		v = ua.MustVariant(x)
	case ua.TypeStatusCode:
		v.SetStatusCode(ua.StatusCode(r.Uint32()))
	case ua.TypeQualifiedName:
		v = ua.MustVariant(ua.NewQualifiedName(uint16(r.IntN(4)), "n"+randString(r)))
	case ua.TypeLocalizedText:
		v = ua.MustVariant(ua.LocalizedText{Locale: "en", Text: randString(r) + "t"})
	}
	return v
}

func buildArray(t ua.TypeID, vals []ua.Variant) any {
	switch t {
	case ua.TypeBoolean:
		return mapVals(vals, (*ua.Variant).Boolean)
	case ua.TypeSByte:
		return mapVals(vals, (*ua.Variant).SByte)
	case ua.TypeByte:
		return mapVals(vals, (*ua.Variant).Byte)
	case ua.TypeInt16:
		return mapVals(vals, (*ua.Variant).Int16)
	case ua.TypeUInt16:
		return mapVals(vals, (*ua.Variant).UInt16)
	case ua.TypeInt32:
		return mapVals(vals, (*ua.Variant).Int32)
	case ua.TypeUInt32:
		return mapVals(vals, (*ua.Variant).UInt32)
	case ua.TypeInt64:
		return mapVals(vals, (*ua.Variant).Int64)
	case ua.TypeUInt64:
		return mapVals(vals, (*ua.Variant).UInt64)
	case ua.TypeFloat:
		return mapVals(vals, (*ua.Variant).Float)
	case ua.TypeDouble:
		return mapVals(vals, (*ua.Variant).Double)
	case ua.TypeString:
		return mapVals(vals, (*ua.Variant).Str)
	case ua.TypeXmlElement:
		return mapVals(vals, func(v *ua.Variant) ua.XmlElement { return ua.XmlElement(v.Str()) })
	case ua.TypeDateTime:
		return mapVals(vals, (*ua.Variant).DateTime)
	case ua.TypeStatusCode:
		return mapVals(vals, (*ua.Variant).StatusCode)
	case ua.TypeGuid:
		return mapVals(vals, func(v *ua.Variant) ua.Guid { return v.Value().(ua.Guid) })
	case ua.TypeByteString:
		return mapVals(vals, func(v *ua.Variant) []byte { return v.Value().([]byte) })
	case ua.TypeNodeID:
		return mapVals(vals, func(v *ua.Variant) ua.NodeID { return v.Value().(ua.NodeID) })
	case ua.TypeExpandedNodeID:
		return mapVals(vals, func(v *ua.Variant) ua.ExpandedNodeID { return v.Value().(ua.ExpandedNodeID) })
	case ua.TypeQualifiedName:
		return mapVals(vals, func(v *ua.Variant) ua.QualifiedName { return v.Value().(ua.QualifiedName) })
	case ua.TypeLocalizedText:
		return mapVals(vals, func(v *ua.Variant) ua.LocalizedText { return v.Value().(ua.LocalizedText) })
	}
	panic(t)
}

func mapVals[T any](vals []ua.Variant, f func(*ua.Variant) T) []T {
	out := make([]T, len(vals))
	for i := range vals {
		out[i] = f(&vals[i])
	}
	return out
}

// TestRoundTripProperty: for random Variants, decode(encode(v)) == v in every
// mode a decoder must accept.
func TestRoundTripProperty(t *testing.T) {
	d := testDecoder()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	seed := r.Uint64()
	r = rand.New(rand.NewPCG(seed, 7))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := 0; i < n; i++ {
		v := randVariant(r, 0)
		for _, mode := range decodableModes {
			js := encVariant(mode, &v)
			got, err := d.DecodeVariant([]byte(js))
			if err != nil {
				t.Fatalf("seed %d: %s: decode %s: %v", seed, mode, js, err)
			}
			if !reflect.DeepEqual(normalize(got), v) {
				t.Fatalf("seed %d: %s: %s\ndecoded %#v\nwant    %#v", seed, mode, js, got, v)
			}
		}
	}
}
