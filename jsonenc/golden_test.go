package jsonenc

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uagate/gateway/uastack/ua"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

var allModes = []Mode{Compact, Verbose, Reversible104, NonReversible104}

func encodeWith(mode Mode, f func(e *Encoder)) string {
	e := NewEncoder(nil, Options{Mode: mode, NamespaceURIs: testNamespaces, ServerURIs: testServers})
	defer e.Release()
	f(e)
	if err := e.Err(); err != nil {
		return "ERROR: " + err.Error()
	}
	return string(e.Bytes())
}

// zeroStruct writes a structure whose every member has its NULL or default
// value, to pin down the omission rules per mode.
func zeroStruct(e *Encoder) {
	e.StartObject()
	e.FieldBoolean("Boolean", false)
	e.FieldInt32("Int32", 0)
	e.FieldUInt32("UInt32", 0)
	e.FieldInt64("Int64", 0)
	e.FieldUInt64("UInt64", 0)
	e.FieldDouble("Double", 0)
	e.FieldString("String", "")
	e.FieldDateTime("DateTime", 0)
	e.FieldGuid("Guid", ua.Guid{})
	e.FieldByteString("ByteString", nil)
	e.FieldByteString("ByteStringEmpty", []byte{})
	e.FieldXmlElement("XmlElement", "")
	e.FieldNodeID("NodeId", ua.NodeID{})
	e.FieldExpandedNodeID("ExpandedNodeId", ua.ExpandedNodeID{})
	e.FieldStatusCode("StatusCode", 0)
	e.FieldQualifiedName("QualifiedName", ua.QualifiedName{})
	e.FieldLocalizedText("LocalizedText", ua.LocalizedText{})
	e.FieldVariant("Variant", &ua.Variant{})
	e.FieldDataValue("DataValue", nil)
	e.FieldExtensionObject("ExtensionObject", nil)
	e.FieldDiagnosticInfo("DiagnosticInfo", nil)
	e.FieldEnum("Enum", 0, "Disabled")
	e.FieldStringArray("StringArrayNull", nil)
	e.FieldStringArray("StringArrayEmpty", []string{})
	e.EndObject()
}

func valueStruct(e *Encoder) {
	e.StartObject()
	e.FieldBoolean("Boolean", true)
	e.FieldInt32("Int32", -7)
	e.FieldInt64("Int64", 9007199254740993)
	e.FieldDouble("Double", 0.5)
	e.FieldString("String", "s")
	e.FieldDateTime("DateTime", testTime)
	e.FieldGuid("Guid", testGuid)
	e.FieldNodeID("NodeId", ua.NewStringNodeID(1, "Valve;1"))
	e.FieldStatusCode("StatusCode", ua.StatusUncertain)
	e.FieldEnum("Enum", 2, "Operational")
	v := ua.NewInt32Variant(7)
	e.FieldVariant("Variant", &v)
	e.EndObject()
}

func goldenDocument(mode Mode) string {
	var buf bytes.Buffer
	for _, c := range variantCases() {
		v := c.v
		fmt.Fprintf(&buf, "%s\t%s\n", c.name, encodeWith(mode, func(e *Encoder) { e.WriteVariant(&v) }))
	}
	fmt.Fprintf(&buf, "%s\t%s\n", "Structure.zero", encodeWith(mode, zeroStruct))
	fmt.Fprintf(&buf, "%s\t%s\n", "Structure.values", encodeWith(mode, valueStruct))
	return buf.String()
}

// TestGolden compares every built-in type × mode with testdata/golden. The
// files were reviewed against the rules in UA-JSON.md; TestSpecRules pins the
// rules themselves. Run with -update after a deliberate change.
func TestGolden(t *testing.T) {
	for _, mode := range allModes {
		got := goldenDocument(mode)
		path := filepath.Join("testdata", "golden", "values."+mode.String()+".txt")
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestGolden -update)", err)
		}
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("%s line %d:\n got  %s\n want %s", mode, i+1, g, w)
			}
		}
		// Every line is valid JSON.
		for _, l := range gl {
			if l == "" {
				continue
			}
			js := l[strings.IndexByte(l, '\t')+1:]
			if !json.Valid([]byte(js)) {
				t.Errorf("%s: invalid JSON: %s", mode, l)
			}
		}
	}
}
