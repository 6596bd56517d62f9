package jsonenc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uagate/gateway/uastack/ua"
)

// FuzzDecode feeds arbitrary bytes to every decoder entry point: none may
// panic, and whatever decodes as a Variant or DataValue must encode to valid
// JSON that decodes again.
func FuzzDecode(f *testing.F) {
	for _, mode := range allModes {
		data, err := os.ReadFile(filepath.Join("testdata", "golden", "values."+mode.String()+".txt"))
		if err == nil {
			for _, l := range strings.Split(string(data), "\n") {
				if i := strings.IndexByte(l, '\t'); i >= 0 {
					js := l[i+1:]
					f.Add([]byte(js))
					f.Add([]byte(js[:len(js)/2])) // truncated
				}
			}
		}
	}
	names, dvs := benchFields(5)
	for _, mode := range allModes {
		var c collector
		w := NewNetworkMessageWriter(WriterOptions{Sink: c.sink})
		encodeBenchMessage(w, mode, names, dvs)
		w.Release()
		f.Add(c.msgs[0])
		f.Add(c.msgs[0][:len(c.msgs[0])*2/3])
	}
	for _, s := range []string{`{"Type":"Double","Body":1}`, `{"UaType":6,"Value":[1,2],"Dimensions":[2,1]}`,
		`{"UaType":22,"Value":{"UaTypeId":"i=884","Low":1}}`, `[[[1]]]`, `"\ud800"`, `{"a":1,"a":2}`,
		`{"MessageType":"ua-metadata","MetaData":{"Fields":[{"Name":"x"}]}}`, `{"MessageType":"ua-status","Status":"Error_3"}`} {
		f.Add([]byte(s))
	}
	d := NewDecoder(DecoderOptions{NamespaceURIs: testNamespaces, ServerURIs: testServers, MaxArrayLength: 1 << 12})
	f.Fuzz(func(t *testing.T, data []byte) {
		if v, err := d.DecodeVariant(data); err == nil {
			js := encVariant(Compact, &v)
			if strings.HasPrefix(js, "ERROR") || !json.Valid([]byte(js)) {
				t.Fatalf("re-encode of %q: %s", data, js)
			}
			if _, err := d.DecodeVariant([]byte(js)); err != nil {
				t.Fatalf("decode of re-encoded %s: %v", js, err)
			}
		}
		if dv, err := d.DecodeDataValue(data); err == nil {
			js := encodeWith(Verbose, func(e *Encoder) { e.WriteDataValue(&dv) })
			if strings.HasPrefix(js, "ERROR") || !json.Valid([]byte(js)) {
				t.Fatalf("re-encode of %q: %s", data, js)
			}
		}
		for _, typ := range []ua.TypeID{ua.TypeDouble, ua.TypeInt64, ua.TypeNodeID, ua.TypeStatusCode, ua.TypeByte} {
			d.DecodeValue(data, typ, false)
			d.DecodeValue(data, typ, true)
		}
		d.DecodeNodeID(data)
		d.DecodeExpandedNodeID(data)
		d.DecodeQualifiedName(data)
		d.DecodeLocalizedText(data)
		d.DecodeStatusCode(data)
		d.DecodeDateTime(data)
		d.DecodeDiagnosticInfo(data)
		d.DecodeExtensionObject(data)
		d.DecodeNetworkMessage(data, FieldTypes{"Field0": ua.TypeDouble})
		d.DecodeSamples(data, nil)
		d.DecodeMetaDataMessage(data)
		d.DecodeStatusMessage(data)
	})
}
