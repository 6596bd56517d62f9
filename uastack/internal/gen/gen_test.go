package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{
		"NodeId":                               "NodeID",
		"ServerUris":                           "ServerURIs",
		"DiscoveryUrls":                        "DiscoveryURLs",
		"EndpointUrl":                          "EndpointURL",
		"IdType":                               "IDType",
		"UserIdentityToken":                    "UserIdentityToken",
		"TranslateBrowsePathsToNodeIdsRequest": "TranslateBrowsePathsToNodeIDsRequest",
		"SubscriptionIds":                      "SubscriptionIDs",
		"ReadValueId":                          "ReadValueID",
		"NamespaceURI":                         "NamespaceURI",
		"PriorityValue_DSCP":                   "PriorityValue_DSCP",
		"SByte":                                "SByte",
		"EUInformation":                        "EUInformation",
		"Uri":                                  "URI",
		"Identifier":                           "Identifier",
		"Int32Id":                              "Int32ID",
	} {
		if got := goName(in); got != want {
			t.Errorf("goName(%q) = %q, want %q", in, got, want)
		}
	}
}

func loadStandard(t *testing.T) *model {
	t.Helper()
	ids, err := readNodeIDs("../../schema/NodeIds.csv")
	if err != nil {
		t.Fatal(err)
	}
	dict, err := readBSD("../../schema/Opc.Ua.Types.bsd")
	if err != nil {
		t.Fatal(err)
	}
	m, err := buildModel(dict, ids, pooledStructs)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestStandardModel(t *testing.T) {
	m := loadStandard(t)
	for _, s := range m.structs {
		if s.recursive {
			t.Errorf("%s is recursive; the standard types are not expected to be", s.name)
		}
		if builtinStructs[s.name] {
			t.Errorf("built-in %s generated", s.name)
		}
		if s.maskBits != 0 {
			t.Logf("%s has optional fields", s.name)
		}
	}
	// Inherited fields are not doubled; the collision rule keeps DataTypeId.
	desc := m.structBy["StructureDescription"]
	var names []string
	for _, f := range desc.fields {
		names = append(names, f.goName)
	}
	if got := strings.Join(names, ","); got != "DataTypeId,Name,StructureDefinition" {
		t.Errorf("StructureDescription fields %s", got)
	}
	if got := len(m.structBy["UABinaryFileDataType"].fields); got != 7 {
		t.Errorf("UABinaryFileDataType has %d fields, want 7", got)
	}
	for _, name := range pooledStructs {
		if !m.structBy[name].pooled {
			t.Errorf("%s not pooled", name)
		}
	}
	if m.enumBy["AccessLevelType"].goBase() != "uint8" || m.enumBy["MessageSecurityMode"].goBase() != "int32" {
		t.Errorf("enum base types")
	}
	if m.minSize(m.structBy["ReadValueId"]) != 16 {
		t.Errorf("ReadValueId minimum size %d", m.minSize(m.structBy["ReadValueId"]))
	}
}

// synthBSD has what the standard dictionary lacks outside the built-ins: a
// structure with optional fields (Part 6 §5.2.7: a UInt32 EncodingMask, one bit per
// optional field) and a union (a UInt32 switch selecting one field).
const synthBSD = `<?xml version="1.0" encoding="utf-8" ?>
<opc:TypeDictionary xmlns:opc="http://opcfoundation.org/BinarySchema/" xmlns:ua="http://opcfoundation.org/UA/" xmlns:tns="http://opcfoundation.org/UA/" DefaultByteOrder="LittleEndian" TargetNamespace="http://opcfoundation.org/UA/">
  <opc:EnumeratedType Name="SynthColor" LengthInBits="32">
    <opc:EnumeratedValue Name="Red" Value="0" />
    <opc:EnumeratedValue Name="Green" Value="1" />
  </opc:EnumeratedType>
  <opc:StructuredType Name="SynthOptional" BaseType="ua:ExtensionObject">
    <opc:Field Name="NameSpecified" TypeName="opc:Bit" />
    <opc:Field Name="ValuesSpecified" TypeName="opc:Bit" />
    <opc:Field Name="InnerSpecified" TypeName="opc:Bit" />
    <opc:Field Name="Reserved1" TypeName="opc:Bit" Length="29" />
    <opc:Field Name="Id" TypeName="opc:UInt32" />
    <opc:Field Name="NoOfColors" TypeName="opc:Int32" />
    <opc:Field Name="Colors" TypeName="tns:SynthColor" LengthField="NoOfColors" />
    <opc:Field Name="Name" TypeName="opc:String" SwitchField="NameSpecified" />
    <opc:Field Name="NoOfValues" TypeName="opc:Int32" SwitchField="ValuesSpecified" />
    <opc:Field Name="Values" TypeName="opc:Double" LengthField="NoOfValues" SwitchField="ValuesSpecified" />
    <opc:Field Name="Inner" TypeName="tns:SynthUnion" SwitchField="InnerSpecified" />
  </opc:StructuredType>
  <opc:StructuredType Name="SynthUnion" BaseType="ua:ExtensionObject">
    <opc:Field Name="SwitchField" TypeName="opc:UInt32" />
    <opc:Field Name="Number" TypeName="opc:Int32" SwitchField="SwitchField" SwitchValue="1" />
    <opc:Field Name="Text" TypeName="opc:String" SwitchField="SwitchField" SwitchValue="2" />
    <opc:Field Name="NoOfNodes" TypeName="opc:Int32" SwitchField="SwitchField" SwitchValue="3" />
    <opc:Field Name="Nodes" TypeName="ua:NodeId" LengthField="NoOfNodes" SwitchField="SwitchField" SwitchValue="3" />
    <opc:Field Name="Color" TypeName="tns:SynthColor" SwitchField="SwitchField" SwitchValue="4" />
  </opc:StructuredType>
</opc:TypeDictionary>
`

const synthIDs = `SynthColor,99000,DataType
SynthOptional,99001,DataType
SynthOptional_Encoding_DefaultBinary,99002,Object
SynthUnion,99003,DataType
SynthUnion_Encoding_DefaultBinary,99004,Object
`

// synthTest runs inside package ua next to the synthetic types.
const synthTest = `package ua

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
)

const (
	ID_SynthColor                         uint32 = 99000
	ID_SynthOptional                      uint32 = 99001
	ID_SynthOptional_Encoding_DefaultBinary uint32 = 99002
	ID_SynthUnion                         uint32 = 99003
	ID_SynthUnion_Encoding_DefaultBinary  uint32 = 99004
)

func synthRoundTrip(t *testing.T, v, into Structure, wantHex string) {
	t.Helper()
	e := NewEncoder(nil)
	v.Encode(e)
	if wantHex != "" {
		want, _ := hex.DecodeString(wantHex)
		if !bytes.Equal(e.Bytes(), want) {
			t.Fatalf("encoding\n got %x\nwant %x", e.Bytes(), want)
		}
	}
	d := NewDecoder(e.Bytes(), nil)
	into.Decode(d)
	if d.Err() != nil || d.Remaining() != 0 {
		t.Fatalf("decode: %v, %d left", d.Err(), d.Remaining())
	}
	if !reflect.DeepEqual(into, v) {
		t.Fatalf("round trip\n got %+v\nwant %+v", into, v)
	}
	for n := 0; n < e.Len(); n++ {
		d := NewDecoder(e.Bytes()[:n], nil)
		into.Decode(d)
		if !errors.Is(d.Err(), StatusBadDecodingError) {
			t.Fatalf("truncated to %d: %v", n, d.Err())
		}
	}
}

func TestSynthetic(t *testing.T) {
	full := &SynthOptional{
		EncodingMask: SynthOptionalNameSpecified | SynthOptionalValuesSpecified | SynthOptionalInnerSpecified,
		ID: 5, Colors: []SynthColor{SynthColorRed, SynthColorGreen}, Name: "ab", Values: []float64{1},
		Inner: SynthUnion{SwitchField: 3, Nodes: []NodeID{NewNumericNodeID(0, 1)}},
	}
	got := &SynthOptional{}
	synthRoundTrip(t, full, got,
		"07000000"+"05000000"+"020000000000000001000000"+"020000006162"+"01000000000000000000f03f"+"03000000"+"01000000"+"0001")

	// Absent optional fields are not encoded, and decoding resets them.
	part := &SynthOptional{EncodingMask: SynthOptionalValuesSpecified, ID: 6, Values: []float64{}}
	synthRoundTrip(t, part, got, "02000000"+"06000000"+"ffffffff"+"00000000")

	for _, u := range []*SynthUnion{
		{},
		{SwitchField: 1, Number: -2},
		{SwitchField: 2, Text: "x"},
		{SwitchField: 4, Color: SynthColorGreen},
	} {
		synthRoundTrip(t, u, &SynthUnion{SwitchField: 3, Nodes: []NodeID{{}}, Number: 9}, "")
	}
	synthRoundTrip(t, &SynthUnion{SwitchField: 1, Number: 7}, &SynthUnion{}, "01000000"+"07000000")

	// An unknown switch value is an error, not a misaligned decode.
	d := NewDecoder([]byte{9, 0, 0, 0}, nil)
	var u SynthUnion
	u.Decode(d)
	if !errors.Is(d.Err(), ErrInvalidEncoding) {
		t.Fatalf("switch 9: %v", d.Err())
	}

	// Registered like the standard types.
	if info, ok := TypeByEncodingID(ID_SynthOptional_Encoding_DefaultBinary); !ok || info.Name != "SynthOptional" {
		t.Fatalf("SynthOptional not registered")
	}
}
`

// TestOptionalFieldsAndUnions generates code for synthBSD and runs synthTest with it
// inside package ua (added through go test -overlay, so nothing is written there).
func TestOptionalFieldsAndUnions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs package ua's tests")
	}
	tmp := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("synth.bsd", synthBSD)
	write("synth.csv", synthIDs)
	ids, err := readNodeIDs(filepath.Join(tmp, "synth.csv"))
	if err != nil {
		t.Fatal(err)
	}
	dict, err := readBSD(filepath.Join(tmp, "synth.bsd"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := buildModel(dict, ids, []string{})
	if err != nil {
		t.Fatal(err)
	}
	u := m.structBy["SynthUnion"]
	if u.fields[0].goName != "SwitchField" || u.fields[1].switchValue != 1 || u.fields[3].goName != "Nodes" || !u.fields[3].array {
		t.Fatalf("union fields %+v", u.fields)
	}
	o := m.structBy["SynthOptional"]
	if o.maskBits != 32 || len(o.maskFields) != 3 || o.fields[2].optBit != 0 || o.fields[3].optBit != 1 || !o.fields[1].array {
		t.Fatalf("optional fields: mask %d %+v %+v", o.maskBits, o.maskFields, o.fields)
	}
	pkg, err := filepath.Abs("../../ua")
	if err != nil {
		t.Fatal(err)
	}
	overlay := map[string]map[string]string{"Replace": {}}
	for name, buf := range map[string]string{
		"synth_enums_gen_test.go": genEnums(m, false).String(),
		"synth_types_gen_test.go": genTypes(m).String(),
		"synth_test.go":           synthTest,
	} {
		src := buf
		if strings.HasSuffix(name, "_gen_test.go") {
			path := filepath.Join(tmp, name)
			if err := writeGo(path, bytes.NewBufferString(src)); err != nil {
				t.Fatal(err)
			}
			overlay["Replace"][filepath.Join(pkg, name)] = path
			continue
		}
		overlay["Replace"][filepath.Join(pkg, name)] = write(name, src)
	}
	oj, err := json.Marshal(overlay)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "test", "-v", "-count=1", "-overlay", write("overlay.json", string(oj)), "-run", "^TestSynthetic$", ".")
	cmd.Dir = pkg
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test with the synthetic types: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestSynthetic") {
		t.Fatalf("unexpected output:\n%s", out)
	}
}
