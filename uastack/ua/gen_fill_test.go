package ua

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/uagate/gateway/pooling"
)

// Tests over every generated structure: a value with every field filled (by
// reflection, which is fine in tests) must survive encode → decode, decoding must
// overwrite a previously filled value completely, and every truncation must fail
// cleanly.

var genT0 = NewDateTime(time.Date(2024, 5, 17, 10, 20, 30, 123456700, time.UTC))

var genGuid = Guid{Data1: 0x72962b91, Data2: 0xfa75, Data3: 0x4ae6, Data4: [8]byte{0x8d, 0x28, 0xb4, 0x04, 0xdc, 0x7d, 0xaf, 0x63}}

// genStructInfos returns the registered generated structures sorted by name.
func genStructInfos() []*TypeInfo {
	typesMu.RLock()
	defer typesMu.RUnlock()
	var infos []*TypeInfo
	for _, info := range typesByName {
		infos = append(infos, info)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	return infos
}

// genFiller fills values deterministically, varying what it writes with a counter so
// that neighbouring fields differ.
type genFiller struct {
	seed int
}

var (
	rtDateTime        = reflect.TypeFor[DateTime]()
	rtNodeID          = reflect.TypeFor[NodeID]()
	rtExpandedNodeID  = reflect.TypeFor[ExpandedNodeID]()
	rtGuid            = reflect.TypeFor[Guid]()
	rtStatusCode      = reflect.TypeFor[StatusCode]()
	rtQualifiedName   = reflect.TypeFor[QualifiedName]()
	rtLocalizedText   = reflect.TypeFor[LocalizedText]()
	rtXmlElement      = reflect.TypeFor[XmlElement]()
	rtExtensionObject = reflect.TypeFor[ExtensionObject]()
	rtDataValue       = reflect.TypeFor[DataValue]()
	rtVariant         = reflect.TypeFor[Variant]()
	rtDiagnosticInfo  = reflect.TypeFor[DiagnosticInfo]()
	rtPoolHeader      = reflect.TypeFor[pooling.Header]()
	rtByteString      = reflect.TypeFor[[]byte]()
)

func (f *genFiller) next() int { f.seed++; return f.seed }

func (f *genFiller) nodeID() NodeID {
	switch n := f.next(); n % 6 {
	case 0:
		return NewNumericNodeID(0, uint32(n%250+1))
	case 1:
		return NewNumericNodeID(2, uint32(1000+n))
	case 2:
		return NewNumericNodeID(300, uint32(100000+n))
	case 3:
		return NewStringNodeID(3, fmt.Sprintf("Demo.Static.Scalar.%d", n))
	case 4:
		return NewGuidNodeID(4, genGuid)
	default:
		return NewOpaqueNodeID(5, []byte{0xde, 0xad, byte(n)})
	}
}

func (f *genFiller) variant() Variant {
	switch n := f.next(); n % 5 {
	case 0:
		return NewInt32Variant(int32(-n))
	case 1:
		return NewStringVariant(fmt.Sprintf("v%d", n))
	case 2:
		return MustVariant([]float64{1.5, float64(n)})
	case 3:
		return NewBooleanVariant(true)
	default:
		return NewDoubleVariant(float64(n) + 0.25)
	}
}

// fill sets every field of v (addressable) to a non-zero value; depth bounds the
// nesting of arrays and ExtensionObjects.
func (f *genFiller) fill(v reflect.Value, depth int) {
	switch v.Type() {
	case rtPoolHeader:
		return
	case rtDateTime:
		v.Set(reflect.ValueOf(genT0 + DateTime(f.next())*10_000_000))
		return
	case rtNodeID:
		v.Set(reflect.ValueOf(f.nodeID()))
		return
	case rtExpandedNodeID:
		x := ExpandedNodeID{NodeID: f.nodeID()}
		switch f.next() % 3 {
		case 1:
			x.NamespaceURI, x.NodeID.Namespace = "urn:example:ns", 0
		case 2:
			x.ServerIndex = 2
		}
		v.Set(reflect.ValueOf(x))
		return
	case rtGuid:
		v.Set(reflect.ValueOf(genGuid))
		return
	case rtStatusCode:
		v.Set(reflect.ValueOf(StatusBadNodeIdUnknown | StatusCode(f.next()%2)))
		return
	case rtQualifiedName:
		v.Set(reflect.ValueOf(NewQualifiedName(uint16(f.next()%4), "Name")))
		return
	case rtLocalizedText:
		v.Set(reflect.ValueOf(LocalizedText{Locale: "en-US", Text: fmt.Sprintf("text %d", f.next())}))
		return
	case rtXmlElement:
		v.Set(reflect.ValueOf(XmlElement("<a>x</a>")))
		return
	case rtExtensionObject:
		if depth > 2 {
			return
		}
		v.Set(reflect.ValueOf(NewExtensionObject(&ElementOperand{Index: uint32(f.next())})))
		return
	case rtDataValue:
		v.Set(reflect.ValueOf(DataValue{
			Value: f.variant(), Status: StatusCode(0x40920000), SourceTimestamp: genT0,
			ServerTimestamp: genT0 + 1, SourcePicoseconds: 10, ServerPicoseconds: 20,
		}))
		return
	case rtVariant:
		v.Set(reflect.ValueOf(f.variant()))
		return
	case rtDiagnosticInfo:
		v.Set(reflect.ValueOf(DiagnosticInfo{
			Mask:       DiagHasSymbolicID | DiagHasAdditionalInfo | DiagHasInnerStatusCode | DiagHasInnerDiagnosticInfo,
			SymbolicID: int32(f.next()), AdditionalInfo: "more", InnerStatusCode: StatusBadTimeout,
			InnerDiagnosticInfo: &DiagnosticInfo{Mask: DiagHasLocale, Locale: 1},
		}))
		return
	case rtByteString:
		v.SetBytes([]byte{1, 2, byte(f.next())})
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.next()%100 + 1)) // small: valid for every enumeration
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.next()%100 + 1))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.next()) + 0.5)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", f.next()))
	case reflect.Slice:
		n := 2
		if depth > 4 {
			n = 0
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n; i++ {
			f.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i), depth+1)
			}
		}
	default:
		panic(fmt.Sprintf("genFiller: unexpected %s", v.Type()))
	}
}

// genFilled returns a new filled value of the registered type.
func genFilled(info *TypeInfo) Structure {
	s := info.New().(Structure)
	(&genFiller{}).fill(reflect.ValueOf(s).Elem(), 0)
	return s
}

func genEncode(t testing.TB, s Structure) []byte {
	t.Helper()
	e := NewEncoder(nil)
	e.WriteStructure(s)
	if err := e.Err(); err != nil {
		t.Fatalf("encode %T: %v", s, err)
	}
	return e.Bytes()
}

// genDecode decodes a NodeId-prefixed message, into into when not nil.
func genDecode(t testing.TB, b []byte, into Structure) Structure {
	t.Helper()
	d := NewDecoder(b, nil)
	s, err := d.ReadStructure(into)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if d.Remaining() != 0 {
		t.Fatalf("decode %T: %d bytes left", s, d.Remaining())
	}
	return s
}

// genTruncations requires every proper prefix of b to fail to decode with an error
// that wraps BadDecodingError, without panicking.
func genTruncations(t *testing.T, b []byte) {
	t.Helper()
	d := NewDecoder(nil, nil)
	for n := 0; n < len(b); n++ {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("truncated to %d of %d bytes: panic: %v", n, len(b), r)
				}
			}()
			d.Reset(b[:n], nil)
			_, err := d.ReadStructure(nil)
			if err == nil {
				t.Fatalf("truncated to %d of %d bytes: no error", n, len(b))
			}
			if !errors.Is(err, StatusBadDecodingError) {
				t.Fatalf("truncated to %d of %d bytes: %v does not wrap BadDecodingError", n, len(b), err)
			}
		}()
	}
}

func TestGenAllTypesRoundTrip(t *testing.T) {
	infos := genStructInfos()
	if len(infos) < 300 {
		t.Fatalf("only %d structures registered", len(infos))
	}
	for _, info := range infos {
		t.Run(info.Name, func(t *testing.T) {
			want := genFilled(info)
			if want.BinaryEncodingID() != info.BinaryEncodingID || want.DataTypeID() != info.DataTypeID {
				t.Fatalf("ids %d/%d, registered %d/%d", want.BinaryEncodingID(), want.DataTypeID(), info.BinaryEncodingID, info.DataTypeID)
			}
			if got := NodeIDName(info.BinaryEncodingID); got != info.Name+"_Encoding_DefaultBinary" {
				t.Fatalf("NodeIDName(%d) = %q", info.BinaryEncodingID, got)
			}
			b := genEncode(t, want)
			got := genDecode(t, b, nil)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip\n got %+v\nwant %+v", got, want)
			}
			// Decoding into a filled value overwrites every field: a zero value
			// decoded into it leaves a zero value.
			zero := info.New().(Structure)
			zb := genEncode(t, zero)
			if bytes.Equal(b, zb) && reflect.TypeOf(zero).Elem().NumField() > 0 {
				t.Fatalf("filled value encodes like a zero one: %x", b)
			}
			again := genDecode(t, zb, got)
			if again != got {
				t.Fatalf("ReadStructure did not decode into the value given")
			}
			if !reflect.DeepEqual(again, zero) {
				t.Fatalf("decoding a zero value into a filled one left\n%+v", again)
			}
			// And decoding the filled value again into it restores it.
			if again := genDecode(t, b, got); !reflect.DeepEqual(again, want) {
				t.Fatalf("second decode\n got %+v\nwant %+v", again, want)
			}
			genTruncations(t, b)
		})
	}
}
