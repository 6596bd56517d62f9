package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The OPC Binary type dictionary (Opc.Ua.Types.bsd) as far as the generator reads it.
type bsdDict struct {
	Enums   []bsdEnum   `xml:"EnumeratedType"`
	Structs []bsdStruct `xml:"StructuredType"`
	Opaques []bsdOpaque `xml:"OpaqueType"`
}

type bsdOpaque struct {
	Name string `xml:"Name,attr"`
}

type bsdEnum struct {
	Name         string     `xml:"Name,attr"`
	LengthInBits int        `xml:"LengthInBits,attr"`
	IsOptionSet  bool       `xml:"IsOptionSet,attr"`
	Doc          string     `xml:"Documentation"`
	Values       []bsdValue `xml:"EnumeratedValue"`
}

type bsdValue struct {
	Name  string `xml:"Name,attr"`
	Value int64  `xml:"Value,attr"`
	Doc   string `xml:"Documentation"`
}

type bsdStruct struct {
	Name     string     `xml:"Name,attr"`
	BaseType string     `xml:"BaseType,attr"`
	Doc      string     `xml:"Documentation"`
	Fields   []bsdField `xml:"Field"`
}

type bsdField struct {
	Name          string `xml:"Name,attr"`
	TypeName      string `xml:"TypeName,attr"`
	Length        string `xml:"Length,attr"`
	LengthField   string `xml:"LengthField,attr"`
	SwitchField   string `xml:"SwitchField,attr"`
	SwitchValue   string `xml:"SwitchValue,attr"`
	SwitchOperand string `xml:"SwitchOperand,attr"`
	SourceType    string `xml:"SourceType,attr"`
	Doc           string `xml:"Documentation"`
}

func readBSD(path string) (*bsdDict, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d bsdDict
	if err := xml.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// builtinStructs are StructuredTypes of the dictionary that describe built-in types
// (or pieces of their encoding) and are written by hand in package ua.
var builtinStructs = map[string]bool{
	"XmlElement": true, "NodeId": true, "ExpandedNodeId": true, "DiagnosticInfo": true,
	"QualifiedName": true, "LocalizedText": true, "DataValue": true, "ExtensionObject": true,
	"Variant": true, "TwoByteNodeId": true, "FourByteNodeId": true, "NumericNodeId": true,
	"StringNodeId": true, "GuidNodeId": true, "ByteStringNodeId": true,
}

// skippedEnums are EnumeratedTypes package ua does not generate: NodeIdType is the
// 6-bit encoding byte of a NodeId, IdType is the hand-written IDType.
var skippedEnums = map[string]bool{"NodeIdType": true, "IdType": true}

// pooledStructs get an embedded pooling.Header, a package-level pool and
// New<T>/Release (see pooled_gen.go).
var pooledStructs = []string{"DataChangeNotification", "MonitoredItemNotification", "EventFieldList", "EventNotificationList"}

// builtin describes one built-in type as a field type: its Go type, the Encoder and
// Decoder calls for scalars and arrays, and the fewest bytes one value takes on the
// wire (for ReadArrayLength).
type builtin struct {
	name    string // schema name ("Int32", "NodeId")
	goType  string
	minSize int
	write   string // scalar write: %s is the field expression
	read    string // scalar read statement: %[1]s is the field expression
	bulk    string // suffix of the Write<X>Array/Read<X>Array pair, "" when none
}

var builtins = map[string]*builtin{}

func init() {
	for _, b := range []*builtin{
		{"Boolean", "bool", 1, "e.WriteBoolean(%s)", "%s = d.ReadBoolean()", "Boolean"},
		{"SByte", "int8", 1, "e.WriteSByte(%s)", "%s = d.ReadSByte()", "SByte"},
		{"Byte", "byte", 1, "e.WriteUInt8(%s)", "%s = d.ReadUInt8()", "Byte"},
		{"Int16", "int16", 2, "e.WriteInt16(%s)", "%s = d.ReadInt16()", "Int16"},
		{"UInt16", "uint16", 2, "e.WriteUInt16(%s)", "%s = d.ReadUInt16()", "UInt16"},
		{"Int32", "int32", 4, "e.WriteInt32(%s)", "%s = d.ReadInt32()", "Int32"},
		{"UInt32", "uint32", 4, "e.WriteUInt32(%s)", "%s = d.ReadUInt32()", "UInt32"},
		{"Int64", "int64", 8, "e.WriteInt64(%s)", "%s = d.ReadInt64()", "Int64"},
		{"UInt64", "uint64", 8, "e.WriteUInt64(%s)", "%s = d.ReadUInt64()", "UInt64"},
		{"Float", "float32", 4, "e.WriteFloat(%s)", "%s = d.ReadFloat()", "Float"},
		{"Double", "float64", 8, "e.WriteDouble(%s)", "%s = d.ReadDouble()", "Double"},
		{"String", "string", 4, "e.WriteString(%s)", "%s = d.ReadString()", "String"},
		{"CharArray", "string", 4, "e.WriteString(%s)", "%s = d.ReadString()", "String"},
		{"DateTime", "DateTime", 8, "e.WriteDateTime(%s)", "%s = d.ReadDateTime()", "DateTime"},
		{"Guid", "Guid", 16, "e.WriteGuid(%s)", "%s = d.ReadGuid()", ""},
		{"ByteString", "[]byte", 4, "e.WriteByteString(%s)", "%[1]s = d.ReadByteStringInto(%[1]s)", ""},
		{"XmlElement", "XmlElement", 4, "e.WriteXmlElement(%s)", "%s = d.ReadXmlElement()", ""},
		{"NodeId", "NodeID", 2, "e.WriteNodeID(%s)", "%s = d.ReadNodeID()", ""},
		{"ExpandedNodeId", "ExpandedNodeID", 2, "e.WriteExpandedNodeID(%s)", "%s = d.ReadExpandedNodeID()", ""},
		{"StatusCode", "StatusCode", 4, "e.WriteStatusCode(%s)", "%s = d.ReadStatusCode()", "StatusCode"},
		{"QualifiedName", "QualifiedName", 6, "e.WriteQualifiedName(%s)", "%s = d.ReadQualifiedName()", ""},
		{"LocalizedText", "LocalizedText", 1, "e.WriteLocalizedText(%s)", "%s = d.ReadLocalizedText()", ""},
		{"ExtensionObject", "ExtensionObject", 3, "e.WriteExtensionObject(&%s)", "d.ReadExtensionObject(&%s)", ""},
		{"DataValue", "DataValue", 1, "e.WriteDataValue(&%s)", "d.ReadDataValue(&%s)", ""},
		{"Variant", "Variant", 1, "e.WriteVariant(&%s)", "d.ReadVariant(&%s)", ""},
		{"DiagnosticInfo", "DiagnosticInfo", 1, "e.WriteDiagnosticInfo(&%s)", "d.ReadDiagnosticInfo(&%s)", ""},
	} {
		builtins[b.name] = b
	}
}

// uaBuiltins are the built-in types the dictionary names with the ua: (or tns:)
// prefix rather than opc:.
var uaBuiltins = map[string]bool{
	"XmlElement": true, "NodeId": true, "ExpandedNodeId": true, "StatusCode": true,
	"QualifiedName": true, "LocalizedText": true, "ExtensionObject": true, "DataValue": true,
	"Variant": true, "DiagnosticInfo": true,
}

// model is the resolved schema: what the generator emits.
type model struct {
	enums    []*enumDef
	structs  []*structDef
	enumBy   map[string]*enumDef
	structBy map[string]*structDef
	ids      *nodeIDs
}

type enumDef struct {
	name, goName, doc string
	bits              int
	optionSet         bool
	values            []enumValue
	dataTypeID        uint32
}

type enumValue struct {
	name, goName, doc string
	value             int64
}

// goBase is the Go type the enum is defined on: int32 for enumerations (Int32 on the
// wire), an unsigned integer of the dictionary's width for option sets.
func (e *enumDef) goBase() string {
	if !e.optionSet {
		return "int32"
	}
	return fmt.Sprintf("uint%d", e.bits)
}

// wire is the built-in the enum is encoded as.
func (e *enumDef) wire() string {
	if !e.optionSet {
		return "Int32"
	}
	switch e.bits {
	case 8:
		return "Byte"
	case 16:
		return "UInt16"
	case 32:
		return "UInt32"
	default:
		return "UInt64"
	}
}

type structDef struct {
	name, goName, doc string
	base              string // schema name of the base type, "" for ExtensionObject
	fields            []*fieldDef
	pooled            bool
	recursive         bool // can contain itself (through arrays): decode is depth-guarded
	maskBits          int  // width of the EncodingMask of optional fields, 0 when none
	maskFields        []maskBit
	dataTypeID        uint32
	encodingID        uint32

	flat     []bsdField // flattened bsd fields (memo)
	flatDone bool
	minSize  int // fewest bytes one value takes; -1 while being computed
}

// maskBit is a named bit of an EncodingMask.
type maskBit struct {
	name, goName string
	pos          int
}

// typeRef is a resolved field type: exactly one of b, enum, st is set.
type typeRef struct {
	b    *builtin
	enum *enumDef
	st   *structDef
}

func (t typeRef) goType() string {
	switch {
	case t.enum != nil:
		return t.enum.goName
	case t.st != nil:
		return t.st.goName
	}
	return t.b.goType
}

type fieldDef struct {
	name, goName, doc string
	typ               typeRef
	array             bool
	optBit            int    // >= 0: encoded only when this EncodingMask bit is set
	switchField       string // Go name of the union switch field, "" when not a union case
	switchValue       int64
}

func (m *model) resolve(typeName string) (typeRef, error) {
	prefix, name, ok := strings.Cut(typeName, ":")
	if !ok {
		return typeRef{}, fmt.Errorf("type %q without namespace prefix", typeName)
	}
	if prefix == "opc" || uaBuiltins[name] {
		if b := builtins[name]; b != nil {
			return typeRef{b: b}, nil
		}
		return typeRef{}, fmt.Errorf("unsupported built-in type %q", typeName)
	}
	if e := m.enumBy[name]; e != nil {
		return typeRef{enum: e}, nil
	}
	if s := m.structBy[name]; s != nil {
		return typeRef{st: s}, nil
	}
	return typeRef{}, fmt.Errorf("unknown type %q", typeName)
}

// buildModel resolves the dictionary against the node ids; the structures named in
// pooled get pooled construction.
func buildModel(dict *bsdDict, ids *nodeIDs, pooled []string) (*model, error) {
	m := &model{enumBy: map[string]*enumDef{}, structBy: map[string]*structDef{}, ids: ids}
	for _, be := range dict.Enums {
		if skippedEnums[be.Name] || len(be.Values) == 0 {
			continue
		}
		switch be.LengthInBits {
		case 32:
		case 8, 16, 64:
			if !be.IsOptionSet {
				return nil, fmt.Errorf("enum %s: %d bits is only supported for option sets", be.Name, be.LengthInBits)
			}
		default:
			return nil, fmt.Errorf("enum %s: unsupported LengthInBits %d", be.Name, be.LengthInBits)
		}
		e := &enumDef{name: be.Name, goName: goName(be.Name), doc: cleanDoc(be.Doc), bits: be.LengthInBits, optionSet: be.IsOptionSet}
		e.dataTypeID = ids.byName[be.Name]
		seen := map[int64]bool{}
		for _, v := range be.Values {
			if seen[v.Value] {
				continue // an alias: String() and the switch need unique values
			}
			seen[v.Value] = true
			e.values = append(e.values, enumValue{name: v.Name, goName: e.goName + goName(v.Name), doc: cleanDoc(v.Doc), value: v.Value})
		}
		m.enums = append(m.enums, e)
		m.enumBy[be.Name] = e
	}
	raw := map[string]*bsdStruct{}
	for i := range dict.Structs {
		bs := &dict.Structs[i]
		raw[bs.Name] = bs
		if builtinStructs[bs.Name] {
			continue
		}
		s := &structDef{name: bs.Name, goName: goName(bs.Name), doc: cleanDoc(bs.Doc), minSize: -2}
		var ok bool
		if s.dataTypeID, ok = ids.byName[bs.Name]; !ok {
			return nil, fmt.Errorf("structure %s: no DataType id in NodeIds.csv", bs.Name)
		}
		if s.encodingID, ok = ids.byName[bs.Name+"_Encoding_DefaultBinary"]; !ok {
			return nil, fmt.Errorf("structure %s: no %s_Encoding_DefaultBinary in NodeIds.csv", bs.Name, bs.Name)
		}
		m.structs = append(m.structs, s)
		m.structBy[bs.Name] = s
	}
	for _, name := range pooled {
		s := m.structBy[name]
		if s == nil {
			return nil, fmt.Errorf("pooled structure %s is not in the dictionary", name)
		}
		s.pooled = true
	}
	for _, s := range m.structs {
		flat, err := m.flatten(s, raw, 0)
		if err != nil {
			return nil, err
		}
		if err := m.buildFields(s, flat); err != nil {
			return nil, fmt.Errorf("structure %s: %w", s.name, err)
		}
	}
	for _, s := range m.structs {
		if err := checkValueCycle(s, nil); err != nil {
			return nil, err
		}
		s.recursive = reaches(s, s, map[*structDef]bool{})
		s.minSize = m.minSize(s)
	}
	return m, nil
}

// flatten returns the bsd fields of s with those of its base types first. The
// dictionary usually repeats the inherited fields at the start of a derived type
// (marked with SourceType, or sometimes not); then the derived list is complete
// and is checked against the base. Otherwise the base fields are prepended.
func (m *model) flatten(s *structDef, raw map[string]*bsdStruct, depth int) ([]bsdField, error) {
	if s.flatDone {
		return s.flat, nil
	}
	if depth > 32 {
		return nil, fmt.Errorf("structure %s: inheritance too deep (a cycle?)", s.name)
	}
	bs := raw[s.name]
	flat := bs.Fields
	_, baseName, _ := strings.Cut(bs.BaseType, ":")
	if baseName != "" && baseName != "ExtensionObject" {
		base := m.structBy[baseName]
		if base == nil {
			return nil, fmt.Errorf("structure %s: unknown base type %s", s.name, bs.BaseType)
		}
		s.base = baseName
		bf, err := m.flatten(base, raw, depth+1)
		if err != nil {
			return nil, err
		}
		repeated := len(bs.Fields) >= len(bf)
		for i := 0; repeated && i < len(bf); i++ {
			f := bs.Fields[i]
			repeated = f.Name == bf[i].Name && f.TypeName == bf[i].TypeName && f.LengthField == bf[i].LengthField
		}
		if !repeated {
			flat = append(append([]bsdField(nil), bf...), bs.Fields...)
		}
		for i, f := range flat {
			if f.SourceType != "" && i >= len(bf) {
				return nil, fmt.Errorf("structure %s: field %s from %s does not match the fields of base %s", s.name, f.Name, f.SourceType, baseName)
			}
		}
	} else {
		for _, f := range flat {
			if f.SourceType != "" {
				return nil, fmt.Errorf("structure %s: field %s from %s without a base type", s.name, f.Name, f.SourceType)
			}
		}
	}
	s.flat, s.flatDone = flat, true
	return flat, nil
}

// buildFields turns the flattened bsd fields into Go fields:
//   - an Int32 field named by the LengthField of the next field is that array's
//     length and is dropped;
//   - a leading run of opc:Bit fields becomes one EncodingMask field (8, 16 or 32
//     bits, least significant bit first); a field whose SwitchField names one of
//     those bits is optional (Part 6 §5.2.7);
//   - a field whose SwitchField names an integer field, with a SwitchValue, is a
//     union case, encoded only when the switch field holds that value.
func (m *model) buildFields(s *structDef, flat []bsdField) error {
	bits := map[string]maskBit{}
	bitLen := map[string]int{}
	isLength := map[string]bool{}
	for i, f := range flat {
		if f.LengthField == "" {
			continue
		}
		if i == 0 || flat[i-1].Name != f.LengthField || flat[i-1].TypeName != "opc:Int32" {
			return fmt.Errorf("field %s: length field %s is not the Int32 right before it", f.Name, f.LengthField)
		}
		isLength[f.LengthField] = true
	}
	goNames := map[string]string{}
	pos := 0
	for i, f := range flat {
		if f.TypeName == "opc:Bit" {
			if pos < 0 {
				return fmt.Errorf("bit field %s is not part of the leading run of bit fields", f.Name)
			}
			n := 1
			if f.Length != "" {
				var err error
				if n, err = strconv.Atoi(f.Length); err != nil || n < 1 {
					return fmt.Errorf("bit field %s: bad Length %q", f.Name, f.Length)
				}
			}
			b := maskBit{name: f.Name, goName: s.goName + goName(f.Name), pos: pos}
			bits[f.Name], bitLen[f.Name] = b, n
			if !strings.HasPrefix(f.Name, "Reserved") && n == 1 {
				s.maskFields = append(s.maskFields, b)
			}
			pos += n
			if i+1 == len(flat) || flat[i+1].TypeName != "opc:Bit" {
				switch pos {
				case 8, 16, 32:
				default:
					return fmt.Errorf("bit fields add up to %d bits, want 8, 16 or 32", pos)
				}
				s.maskBits = pos
				pos = -1
			}
			continue
		}
		if pos > 0 {
			return fmt.Errorf("field %s interrupts the bit fields", f.Name)
		}
		pos = -1
		if isLength[f.Name] {
			continue
		}
		t, err := m.resolve(f.TypeName)
		if err != nil {
			return fmt.Errorf("field %s: %w", f.Name, err)
		}
		fd := &fieldDef{name: f.Name, goName: goName(f.Name), doc: cleanDoc(f.Doc), typ: t, array: f.LengthField != "", optBit: -1}
		if f.SwitchOperand != "" && f.SwitchOperand != "Equals" {
			return fmt.Errorf("field %s: SwitchOperand %s is not supported", f.Name, f.SwitchOperand)
		}
		if f.SwitchField != "" {
			if b, ok := bits[f.SwitchField]; ok {
				if bitLen[f.SwitchField] != 1 || f.SwitchValue != "" {
					return fmt.Errorf("field %s: switch on a %d-bit field is not supported", f.Name, bitLen[f.SwitchField])
				}
				fd.optBit = b.pos
			} else {
				sw, ok := goNames[f.SwitchField]
				if !ok || f.SwitchValue == "" {
					return fmt.Errorf("field %s: switch field %s is not an earlier field with a SwitchValue", f.Name, f.SwitchField)
				}
				v, err := strconv.ParseInt(f.SwitchValue, 10, 64)
				if err != nil {
					return fmt.Errorf("field %s: SwitchValue %q: %w", f.Name, f.SwitchValue, err)
				}
				fd.switchField, fd.switchValue = sw, v
			}
		}
		goNames[f.Name] = fd.goName
		s.fields = append(s.fields, fd)
	}
	return m.fixFieldNames(s)
}

// generatedMethods are the methods every generated structure has; a field may not
// take one of these names.
var generatedMethods = []string{"Encode", "Decode", "BinaryEncodingID", "DataTypeID"}

// pooledMembers are the extra names of a pooled structure (the embedded
// pooling.Header, its method, Release and reset).
var pooledMembers = []string{"Header", "PoolHeader", "Release", "reset"}

// fixFieldNames applies the collision rule: a field whose Go name would collide with a
// method of its type (DataTypeDescription.DataTypeId → DataTypeID) keeps its schema
// spelling. Any remaining duplicate is an error.
func (m *model) fixFieldNames(s *structDef) error {
	taken := map[string]bool{}
	for _, n := range generatedMethods {
		taken[n] = true
	}
	if s.pooled {
		for _, n := range pooledMembers {
			taken[n] = true
		}
	}
	if s.maskBits > 0 {
		taken["EncodingMask"] = true
	}
	seen := map[string]bool{}
	for _, f := range s.fields {
		if taken[f.goName] {
			f.goName = f.name
		}
		if taken[f.goName] || seen[f.goName] {
			return fmt.Errorf("field %s: Go name %s is taken", f.name, f.goName)
		}
		seen[f.goName] = true
	}
	return nil
}

// checkValueCycle fails when a structure contains itself by value (not through an
// array), which Go cannot represent.
func checkValueCycle(s *structDef, path []*structDef) error {
	for _, p := range path {
		if p == s {
			return fmt.Errorf("structure %s contains itself by value", s.name)
		}
	}
	path = append(path, s)
	for _, f := range s.fields {
		if f.typ.st != nil && !f.array {
			if err := checkValueCycle(f.typ.st, path); err != nil {
				return err
			}
		}
	}
	return nil
}

// reaches reports whether a value of from can contain a value of to.
func reaches(from, to *structDef, seen map[*structDef]bool) bool {
	for _, f := range from.fields {
		st := f.typ.st
		if st == nil {
			continue
		}
		if st == to {
			return true
		}
		if !seen[st] {
			seen[st] = true
			if reaches(st, to, seen) {
				return true
			}
		}
	}
	return false
}

// minSize is the fewest bytes an encoded value of s takes: optional fields and union
// cases count 0, arrays 4 (their length). It is a lower bound used to refuse array
// lengths that the bytes left cannot hold.
func (m *model) minSize(s *structDef) int {
	if s.minSize >= 0 {
		return s.minSize
	}
	n := s.maskBits / 8
	for _, f := range s.fields {
		switch {
		case f.optBit >= 0 || f.switchField != "":
		case f.array:
			n += 4
		default:
			n += m.typeMinSize(f.typ)
		}
	}
	s.minSize = n
	return n
}

func (m *model) typeMinSize(t typeRef) int {
	switch {
	case t.enum != nil:
		return t.enum.bits / 8
	case t.st != nil:
		return m.minSize(t.st)
	}
	return t.b.minSize
}

// cleanDoc folds the whitespace of a Documentation element.
func cleanDoc(s string) string { return strings.Join(strings.Fields(s), " ") }
