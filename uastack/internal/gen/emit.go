package main

import (
	"bytes"
	"fmt"
	"go/token"
	"sort"
	"strconv"
	"strings"
)

// nodeIDs is NodeIds.csv: name, numeric id, node class.
type nodeIDs struct {
	rows   []nodeIDRow
	byName map[string]uint32
}

type nodeIDRow struct {
	name  string
	id    uint32
	class string
}

func readNodeIDs(path string) (*nodeIDs, error) {
	recs, err := readCSV(path)
	if err != nil {
		return nil, err
	}
	ids := &nodeIDs{byName: map[string]uint32{}}
	byID := map[uint32]string{}
	for i, r := range recs {
		if len(r) < 3 {
			return nil, fmt.Errorf("%s:%d: want name,id,class", path, i+1)
		}
		v, err := strconv.ParseUint(r[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: id %q: %w", path, i+1, r[1], err)
		}
		if !token.IsIdentifier(nodeIDConst(r[0])) {
			return nil, fmt.Errorf("%s:%d: name %q is not usable in a Go identifier", path, i+1, r[0])
		}
		if _, dup := ids.byName[r[0]]; dup {
			return nil, fmt.Errorf("%s:%d: duplicate name %s", path, i+1, r[0])
		}
		if other, dup := byID[uint32(v)]; dup {
			return nil, fmt.Errorf("%s:%d: id %d of %s is also %s", path, i+1, v, r[0], other)
		}
		byID[uint32(v)] = r[0]
		ids.byName[r[0]] = uint32(v)
		ids.rows = append(ids.rows, nodeIDRow{r[0], uint32(v), r[2]})
	}
	return ids, nil
}

// genNodeIDs writes the node id constants and the NodeIDName table.
func genNodeIDs(ids *nodeIDs) *bytes.Buffer {
	var b bytes.Buffer
	b.WriteString(header + "package ua\n\n")
	// One declaration per line: in a const block gofmt would pad every name to the
	// longest (some 150 characters).
	b.WriteString("// Numeric identifiers of the standard nodes in namespace 0 (NodeIds.csv), named\n" +
		"// ID_ followed by the node's symbolic name, in the order of NodeIds.csv.\n\n")
	for _, r := range ids.rows {
		fmt.Fprintf(&b, "const %s uint32 = %d\n", nodeIDConst(r.name), r.id)
	}
	b.WriteString("\n")
	b.WriteString(`// NodeIDName returns the symbolic name of a standard namespace-0 node id
// ("Server_ServerStatus_State" for 2259), or "" when id is not one. It is meant for
// diagnostics: a binary search in a table sorted by id.
func NodeIDName(id uint32) string {
	lo, hi := 0, len(nodeIDNames)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if nodeIDNames[m].id < id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(nodeIDNames) && nodeIDNames[lo].id == id {
		return nodeIDNames[lo].name
	}
	return ""
}

// nodeIDNames is sorted by id.
var nodeIDNames = [...]struct {
	id   uint32
	name string
}{
`)
	rows := append([]nodeIDRow(nil), ids.rows...)
	sort.Slice(rows, func(i, j int) bool { return rows[i].id < rows[j].id })
	for _, r := range rows {
		fmt.Fprintf(&b, "\t{%d, %q},\n", r.id, r.name)
	}
	b.WriteString("}\n")
	return &b
}

// docLines writes text as // comment lines wrapped near 88 columns.
func docLines(b *bytes.Buffer, indent, text string) {
	words := strings.Fields(text)
	line := indent + "//"
	for _, w := range words {
		if len(line)+1+len(w) > 88 && line != indent+"//" {
			b.WriteString(line + "\n")
			line = indent + "//"
		}
		line += " " + w
	}
	if line != indent+"//" {
		b.WriteString(line + "\n")
	}
}

// genEnums writes the enumerations and option sets, and with helpers the code their
// String methods share.
func genEnums(m *model, helpers bool) *bytes.Buffer {
	var b bytes.Buffer
	b.WriteString(header + "package ua\n\nimport \"strconv\"\n\n")
	for _, e := range m.enums {
		what := "enumeration, encoded as an Int32"
		if e.optionSet {
			what = fmt.Sprintf("option set (a bit mask), encoded as a %s", e.wire())
		}
		docLines(&b, "", fmt.Sprintf("%s is the %s %s (DataType i=%d).", e.goName, e.name, what, e.dataTypeID))
		if e.doc != "" {
			b.WriteString("//\n")
			docLines(&b, "", e.doc)
		}
		fmt.Fprintf(&b, "type %s %s\n\n", e.goName, e.goBase())
		fmt.Fprintf(&b, "// Values of %s.\nconst (\n", e.goName)
		for _, v := range e.values {
			if v.doc != "" {
				docLines(&b, "\t", v.doc)
			}
			fmt.Fprintf(&b, "\t%s %s = %d\n", v.goName, e.goName, v.value)
		}
		b.WriteString(")\n\n")
		if !e.optionSet {
			fmt.Fprintf(&b, "// String returns the value's name, or %s(<number>).\n", e.goName)
			fmt.Fprintf(&b, "func (v %s) String() string {\n\tswitch v {\n", e.goName)
			for _, v := range e.values {
				fmt.Fprintf(&b, "\tcase %s:\n\t\treturn %q\n", v.goName, v.name)
			}
			fmt.Fprintf(&b, "\t}\n\treturn \"%s(\" + strconv.FormatInt(int64(v), 10) + \")\"\n}\n\n", e.goName)
			continue
		}
		zero := "0"
		var bits []enumValue
		for _, v := range e.values {
			if v.value == 0 {
				zero = v.name
			} else {
				bits = append(bits, v)
			}
		}
		tbl := lowerFirst(e.goName) + "Bits"
		fmt.Fprintf(&b, "// String returns the names of the bits set, joined by '|' (%q when none is);\n// unnamed bits are shown in hex.\n", zero)
		fmt.Fprintf(&b, "func (v %s) String() string {\n\tif v == 0 {\n\t\treturn %q\n\t}\n\treturn optionSetString(uint64(v), %s[:])\n}\n\n", e.goName, zero, tbl)
		fmt.Fprintf(&b, "var %s = [...]optionBit{\n", tbl)
		for _, v := range bits {
			fmt.Fprintf(&b, "\t{%d, %q},\n", v.value, v.name)
		}
		b.WriteString("}\n\n")
	}
	if !helpers {
		return &b
	}
	b.WriteString(`// optionBit names one bit (or group of bits) of an option set.
type optionBit struct {
	mask uint64
	name string
}

func optionSetString(v uint64, bits []optionBit) string {
	var b []byte
	for _, o := range bits {
		if v&o.mask == o.mask {
			if len(b) > 0 {
				b = append(b, '|')
			}
			b = append(b, o.name...)
			v &^= o.mask
		}
	}
	if v != 0 {
		if len(b) > 0 {
			b = append(b, '|')
		}
		b = append(b, "0x"...)
		b = strconv.AppendUint(b, v, 16)
	}
	return string(b)
}
`)
	return &b
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	r := strings.ToLower(s[:1]) + s[1:]
	// Keep initialisms readable: "IDType" → "idType".
	for i := 1; i < len(s) && s[i] >= 'A' && s[i] <= 'Z' && (i+1 == len(s) || s[i+1] >= 'A' && s[i+1] <= 'Z'); i++ {
		r = r[:i] + strings.ToLower(s[i:i+1]) + r[i+1:]
	}
	if token.IsKeyword(r) {
		r += "_"
	}
	return r
}

// typeGen writes one structure's code.
type typeGen struct {
	b *bytes.Buffer
	m *model
	s *structDef
}

func (g *typeGen) p(format string, args ...any) { fmt.Fprintf(g.b, format+"\n", args...) }

func (g *typeGen) fieldType(f *fieldDef) string {
	if f.array {
		return "[]" + f.typ.goType()
	}
	return f.typ.goType()
}

// condition returns the Go condition under which f is on the wire, or "".
func (g *typeGen) condition(f *fieldDef) string {
	switch {
	case f.optBit >= 0:
		for _, mb := range g.s.maskFields {
			if mb.pos == f.optBit {
				return fmt.Sprintf("s.EncodingMask&%s != 0", mb.goName)
			}
		}
		return fmt.Sprintf("s.EncodingMask&%#x != 0", uint64(1)<<f.optBit)
	case f.switchField != "":
		return fmt.Sprintf("s.%s == %d", f.switchField, f.switchValue)
	}
	return ""
}

func (g *typeGen) maskType() string { return fmt.Sprintf("uint%d", g.s.maskBits) }

func (g *typeGen) maskWire() string {
	switch g.s.maskBits {
	case 8:
		return "UInt8"
	case 16:
		return "UInt16"
	}
	return "UInt32"
}

func (g *typeGen) genStruct() {
	s := g.s
	kind := "structure"
	if strings.HasSuffix(s.name, "Request") || strings.HasSuffix(s.name, "Response") || s.name == "ServiceFault" {
		kind = "service message"
	}
	text := fmt.Sprintf("%s is the %s %s (DataType i=%d, DefaultBinary i=%d).", s.goName, kind, s.name, s.dataTypeID, s.encodingID)
	if s.base != "" {
		text += fmt.Sprintf(" It extends %s, whose fields come first.", g.m.structBy[s.base].goName)
	}
	docLines(g.b, "", text)
	if s.doc != "" {
		g.p("//")
		docLines(g.b, "", s.doc)
	}
	if s.pooled {
		g.p("//")
		docLines(g.b, "", fmt.Sprintf("%s is pooled: the decoder takes it from %sPool and its owner gives it back with Release (see New%s). The embedded pooling.Header is the pool's bookkeeping and is not encoded. A copy of a %s shares its slices with the original.", s.goName, s.goName, s.goName, s.goName))
	}
	g.p("type %s struct {", s.goName)
	if s.pooled {
		g.p("\tpooling.Header // pool bookkeeping; not encoded")
		g.p("")
	}
	if s.maskBits > 0 {
		g.p("\t// EncodingMask tells which optional fields are present: the %s* bits.", s.goName)
		g.p("\tEncodingMask %s", g.maskType())
	}
	for _, f := range s.fields {
		if f.doc != "" {
			docLines(g.b, "\t", f.doc)
		}
		comment := ""
		switch {
		case f.optBit >= 0:
			comment = fmt.Sprintf(" // optional: present when EncodingMask bit %d is set", f.optBit)
		case f.switchField != "":
			comment = fmt.Sprintf(" // union case: present when %s == %d", f.switchField, f.switchValue)
		}
		g.p("\t%s %s%s", f.goName, g.fieldType(f), comment)
	}
	g.p("}\n")
	if len(s.maskFields) > 0 {
		g.p("// EncodingMask bits of %s.", s.goName)
		g.p("const (")
		for _, mb := range s.maskFields {
			g.p("\t%s %s = %#x", mb.goName, g.maskType(), uint64(1)<<mb.pos)
		}
		g.p(")\n")
	}
	g.p("func (*%s) BinaryEncodingID() uint32 { return %s }", s.goName, nodeIDConst(s.name+"_Encoding_DefaultBinary"))
	g.p("func (*%s) DataTypeID() uint32       { return %s }\n", s.goName, nodeIDConst(s.name))
	// Service messages expose their header through ua.Request / ua.Response, so
	// the channel, client and server reach it without a type switch.
	for _, f := range s.fields {
		if !f.array && f.goName == f.typ.goType() && (f.goName == "RequestHeader" || f.goName == "ResponseHeader") {
			g.p("// Get%s returns a pointer to the message's %s.", f.goName, f.goName)
			g.p("func (s *%s) Get%s() *%s { return &s.%s }\n", s.goName, f.goName, f.goName, f.goName)
		}
	}
	g.genEncode()
	g.genDecode()
}

// enumWire maps the wire type of an enum to the Encoder/Decoder method suffix and
// the Go type it takes.
var enumWire = map[string][2]string{
	"Int32": {"Int32", "int32"}, "Byte": {"UInt8", "uint8"}, "UInt16": {"UInt16", "uint16"},
	"UInt32": {"UInt32", "uint32"}, "UInt64": {"UInt64", "uint64"},
}

func (g *typeGen) scalarWrite(t typeRef, x string) string {
	switch {
	case t.enum != nil:
		w := enumWire[t.enum.wire()]
		return fmt.Sprintf("e.Write%s(%s(%s))", w[0], w[1], x)
	case t.st != nil:
		return x + ".Encode(e)"
	}
	return fmt.Sprintf(t.b.write, x)
}

func (g *typeGen) scalarRead(t typeRef, x string) string {
	switch {
	case t.enum != nil:
		return fmt.Sprintf("%s = %s(d.Read%s())", x, t.enum.goName, enumWire[t.enum.wire()][0])
	case t.st != nil:
		return x + ".Decode(d)"
	}
	return fmt.Sprintf(t.b.read, x)
}

func (g *typeGen) zero(f *fieldDef) string {
	if f.array {
		return "nil"
	}
	t := f.typ
	switch {
	case t.enum != nil:
		return "0"
	case t.st != nil:
		return t.st.goName + "{}"
	}
	switch t.b.goType {
	case "bool":
		return "false"
	case "string", "XmlElement":
		return `""`
	case "[]byte":
		return "nil"
	case "int8", "byte", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64", "DateTime", "StatusCode":
		return "0"
	}
	return t.b.goType + "{}"
}

func (g *typeGen) minElem(t typeRef) int {
	n := g.m.typeMinSize(t)
	if n < 1 {
		n = 1
	}
	return n
}

func (g *typeGen) genEncode() {
	s := g.s
	g.p("// Encode writes s in the OPC UA binary encoding.")
	g.p("func (s *%s) Encode(e *Encoder) {", s.goName)
	if s.recursive {
		g.p("\tif !e.enter(%q) {\n\t\treturn\n\t}\n\tdefer e.leave()", s.name)
	}
	if s.maskBits > 0 {
		g.p("\te.Write%s(s.EncodingMask)", g.maskWire())
	}
	for _, f := range s.fields {
		x := "s." + f.goName
		cond := g.condition(f)
		ind := "\t"
		if cond != "" {
			g.p("\tif %s {", cond)
			ind = "\t\t"
		}
		switch {
		case !f.array:
			g.p("%s%s", ind, g.scalarWrite(f.typ, x))
		case f.typ.b != nil && f.typ.b.bulk != "":
			g.p("%se.Write%sArray(%s)", ind, f.typ.b.bulk, x)
		default:
			g.p("%se.WriteArrayLength(len(%s), %s == nil)", ind, x, x)
			g.p("%sfor i := range %s {", ind, x)
			g.p("%s\t%s", ind, g.scalarWrite(f.typ, x+"[i]"))
			g.p("%s}", ind)
		}
		if cond != "" {
			g.p("\t}")
		}
	}
	g.p("}\n")
}

func (g *typeGen) genDecode() {
	s := g.s
	g.p("// Decode reads s, overwriting every field and reusing the capacity of its slices.")
	g.p("func (s *%s) Decode(d *Decoder) {", s.goName)
	if s.recursive {
		g.p("\tif !d.Enter(%q) {\n\t\treturn\n\t}\n\tdefer d.Leave()", s.name)
	}
	needN := false
	for _, f := range s.fields {
		if f.array && (f.typ.b == nil || f.typ.b.bulk == "") {
			needN = true
		}
	}
	if needN {
		g.p("\tvar n int")
	}
	if s.maskBits > 0 {
		g.p("\ts.EncodingMask = d.Read%s()", g.maskWire())
	}
	// Union switch values, checked right after the switch field is read.
	cases := map[string][]int64{}
	for _, f := range s.fields {
		if f.switchField != "" {
			cases[f.switchField] = append(cases[f.switchField], f.switchValue)
		}
	}
	for _, f := range s.fields {
		x := "s." + f.goName
		cond := g.condition(f)
		ind := "\t"
		if cond != "" {
			g.p("\tif %s {", cond)
			ind = "\t\t"
		}
		switch {
		case !f.array:
			g.p("%s%s", ind, g.scalarRead(f.typ, x))
		case f.typ.b != nil && f.typ.b.bulk != "":
			g.p("%s%s = d.Read%sArray(%s)", ind, x, f.typ.b.bulk, x)
		default:
			g.p("%sn = d.ReadArrayLength(%q, %d)", ind, s.name+"."+f.name, g.minElem(f.typ))
			// grow charges a new backing array against the decoder's memory
			// budget (reused capacity is free) and gives nil when it is spent.
			g.p("%s%s = grow(d, %s, n)", ind, x, x)
			g.p("%sfor i := range %s {", ind, x)
			g.p("%s\t%s", ind, g.scalarRead(f.typ, x+"[i]"))
			g.p("%s\tif d.Err() != nil {\n%s\t\tbreak\n%s\t}", ind, ind, ind)
			g.p("%s}", ind)
		}
		if cond != "" {
			g.p("\t} else {\n\t\t%s = %s\n\t}", x, g.zero(f))
		}
		if vals := cases[f.goName]; len(vals) > 0 && !f.array {
			var vs []string
			for _, v := range append([]int64{0}, vals...) {
				vs = append(vs, strconv.FormatInt(v, 10))
			}
			g.p("\tswitch %s {\n\tcase %s:\n\tdefault:", x, strings.Join(vs, ", "))
			g.p("\t\td.Fail(%q, fmt.Errorf(\"%%w: union switch %%d\", ErrInvalidEncoding, %s))\n\t}", s.name+"."+f.name, x)
		}
	}
	g.p("}\n")
}

// genTypes writes the structures, their codec methods and their registration.
func genTypes(m *model) *bytes.Buffer {
	var body bytes.Buffer
	usesFmt, usesPooling := false, false
	for _, s := range m.structs {
		g := &typeGen{b: &body, m: m, s: s}
		g.genStruct()
		usesPooling = usesPooling || s.pooled
		for _, f := range s.fields {
			usesFmt = usesFmt || f.switchField != ""
		}
	}
	body.WriteString("// init registers every generated structure for the ExtensionObject decoder; the\n" +
		"// pooled ones are made by their pools.\nfunc init() {\n\tfor _, t := range [...]TypeInfo{\n")
	for _, s := range m.structs {
		newf := fmt.Sprintf("func() Encodable { return new(%s) }", s.goName)
		if s.pooled {
			newf = fmt.Sprintf("func() Encodable { return New%s() }", s.goName)
		}
		fmt.Fprintf(&body, "\t\t{Name: %q, DataTypeID: %s, BinaryEncodingID: %s, New: %s, Size: unsafe.Sizeof(%s{})},\n",
			s.name, nodeIDConst(s.name), nodeIDConst(s.name+"_Encoding_DefaultBinary"), newf, s.goName)
	}
	body.WriteString("\t} {\n\t\tRegisterType(t)\n\t}\n}\n")

	var b bytes.Buffer
	b.WriteString(header + "package ua\n\n")
	var imports []string
	if usesFmt {
		imports = append(imports, `"fmt"`)
	}
	if usesPooling {
		imports = append(imports, `"github.com/uagate/gateway/pooling"`)
	}
	imports = append(imports, `"unsafe"`)
	b.WriteString("import (\n\t" + strings.Join(imports, "\n\t") + "\n)\n\n")
	b.Write(body.Bytes())
	return &b
}

// genPooled writes the pools of the pooled structures.
func genPooled(m *model) *bytes.Buffer {
	var b bytes.Buffer
	b.WriteString(header + "package ua\n\nimport (\n\t\"unsafe\"\n\n\t\"github.com/uagate/gateway/pooling\"\n)\n\n")
	var registered []string
	for _, s := range m.structs {
		if !s.pooled {
			continue
		}
		g := &typeGen{b: &b, m: m, s: s}
		n := s.goName
		registered = append(registered, fmt.Sprintf("\tpooling.Register(\"ua.%s\", %sPool)\n", n, n))
		docLines(&b, "", fmt.Sprintf("%sPool holds idle %s objects (at most pooling.DefaultCapacity), bare: the capacity of their slices is in %sIdle. The decoder takes from it (New%s) when it meets a %s in an ExtensionObject; Release puts back. Take from it with New%s, not Get, which gives an object without capacity.", n, n, lowerFirst(n), n, s.name, n))
		g.p("var %sPool = pooling.NewPool[%s](0, (*%s).putReset)\n", n, n, n)
		docLines(&b, "", fmt.Sprintf("%sIdle holds the slices of the idle %s objects, within MaxIdlePooledBytes for all pooled types together (pooled.go).", lowerFirst(n), n))
		g.p("var %sIdle idleStack[%s, *%s]\n", lowerFirst(n), n, n)
		docLines(&b, "", fmt.Sprintf("New%s returns an empty %s from %sPool, with the capacity of the slices of one put back before when there is one. The caller owns it and gives it back with Release when done, typically in a defer.", n, n, n))
		g.p("func New%s() *%s {\n\ts := %sPool.Get()\n\t%sIdle.get(s)\n\treturn s\n}\n", n, n, n, lowerFirst(n))
		docLines(&b, "", fmt.Sprintf("putReset is %sPool's reset: reset, then the slices go to %sIdle (within the budget) and s into the pool bare.", n, lowerFirst(n)))
		g.p("func (s *%s) putReset() {\n\ts.reset()\n\t%sIdle.put(s, s.retainedBytes())\n}\n", n, lowerFirst(n))
		docLines(&b, "", fmt.Sprintf("Release resets s and gives it back to %sPool. Afterwards neither s nor its slices, nor a pointer into them, may be used: the next New%s may hand it to another goroutine. Values copied out of s before (a DataValue, a Variant, a string) stay valid; see Borrowed notifications in the package documentation. Release only a %s that stands alone (from New%s or an ExtensionObject); an element of a slice, such as one of DataChangeNotification.MonitoredItems, belongs to the object holding the slice. An ExtensionObject holding s releases it through ExtensionObject.Release; a second Release of the same object is ignored by the pool.", n, n, n, n))
		g.p("func (s *%s) Release() { %sPool.Put(s) }\n", n, n)
		docLines(&b, "", "reset zeroes s for reuse. It keeps the capacity of its slices, and of the slices of their elements, so that decoding into s again does not allocate; only the elements in use are cleared: those beyond the length are already zero, because Grow clears the tail when a decode shrinks a slice, so nothing stays reachable from an idle object and a Release costs what was used, not the largest message ever seen. Slices that retain more than MaxPooledBytes together are dropped instead, and s goes back empty: one huge message must not pin its memory in the pool for the life of the process.")
		g.p("func (s *%s) reset() {", n)
		var keep []string
		for _, f := range s.fields {
			x := "s." + f.goName
			v := lowerFirst(f.goName)
			switch {
			case f.array:
				g.p("\t%s := %s", v, x)
				switch {
				case f.typ.st != nil && f.typ.st.pooled:
					g.p("\tfor i := range %s {\n\t\t%s[i].reset()\n\t}", v, v)
				case f.typ.b != nil && f.typ.b.name == "ExtensionObject":
					g.p("\tfor i := range %s {\n\t\t%s[i].Release()\n\t}", v, v)
				default:
					g.p("\tclear(%s)", v)
				}
				keep = append(keep, fmt.Sprintf("%s: %s[:0]", f.goName, v))
			case f.typ.b != nil && f.typ.b.name == "ExtensionObject":
				g.p("\t%s.Release()", x)
			case f.typ.b != nil && f.typ.b.name == "ByteString":
				keep = append(keep, fmt.Sprintf("%s: %s[:0]", f.goName, x))
			}
		}
		g.p("\tif s.retainedBytes() > MaxPooledBytes {\n\t\t*s = %s{}\n\t\treturn\n\t}", n)
		g.p("\t*s = %s{%s}", n, strings.Join(keep, ", "))
		g.p("}\n")
		g.genRetained()
	}
	docLines(&b, "", "The pools are registered for the metrics (pooling.Registered).")
	b.WriteString("func init() {\n" + strings.Join(registered, "") + "}\n")
	return &b
}

// genRetained writes retainedBytes: the memory a pooled structure's slices keep
// across a reset (their capacity, and what the pooled elements keep in turn).
func (g *typeGen) genRetained() {
	s := g.s
	docLines(g.b, "", "retainedBytes is the memory the slices of s keep across a reset: their capacity, and what their pooled elements keep in turn, up to the capacity (elements past the length are zero or keep the capacity a reset left them).")
	var terms []string
	var loops []string
	for _, f := range s.fields {
		x := "s." + f.goName
		switch {
		case f.array:
			terms = append(terms, fmt.Sprintf("cap(%s)*int(unsafe.Sizeof(%s[0]))", x, x))
			if f.typ.st != nil && f.typ.st.pooled && g.m.retains(f.typ.st) {
				loops = append(loops, x)
			}
		case f.typ.b != nil && f.typ.b.name == "ByteString":
			terms = append(terms, fmt.Sprintf("cap(%s)", x))
		}
	}
	if len(terms) == 0 {
		g.p("func (s *%s) retainedBytes() int { return 0 }\n", s.goName)
		return
	}
	g.p("func (s *%s) retainedBytes() int {", s.goName)
	g.p("\tn := %s", strings.Join(terms, " + "))
	for _, x := range loops {
		v := lowerFirst(strings.TrimPrefix(x, "s."))
		g.p("\tfor i, %s := 0, %s[:cap(%s)]; i < len(%s); i++ {\n\t\tn += %s[i].retainedBytes()\n\t}", v, x, x, v, v)
	}
	g.p("\treturn n")
	g.p("}\n")
}

// retains reports whether a pooled structure keeps slice capacity across a reset.
func (m *model) retains(s *structDef) bool {
	for _, f := range s.fields {
		if f.array || (f.typ.b != nil && f.typ.b.name == "ByteString") {
			return true
		}
	}
	return false
}
