package publishednodes

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/uagate/gateway/bridge/config"
)

// FuzzParse: whatever the published nodes file, config.Parse returns a
// configuration or a *config.Error, never panics; what it accepts
// validates, and its entries read back publish into the same configuration.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`[{"EndpointUrl": "opc.tcp://a:1", "OpcNodes": [{"Id": "i=1"}]}]`, `[{"EndpointUrl": "opc.tcp://a:1",`,
		`[{"EndpointUrl": "opc.tcp://a:1", "DataSetWriterGroup": "g", "OpcNodes": [{"Id": "i=1", "OpcPublishingInterval": 10}, {"Id": "i=1"}]}, {"EndpointUrl": "opc.tcp://b:1", "DataSetWriterGroup": "g", "OpcNodes": [{"Id": "i=2"}]}]`,
		"[{\"EndpointUrl\": \"opc.tcp://a:1\" /* c */, \"NodeId\": {\"Identifier\": \"i=1\"},},]"} {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob("testdata/*.json")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !IsFile(data) {
			return
		}
		c, _, err := config.Parse(data, "fuzz.json")
		if err != nil {
			if config.Issues(err) == nil {
				t.Fatalf("error %T is not a *config.Error: %v", err, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted, but Validate fails: %v", err)
		}
		before := c.String()
		for _, e := range Entries(c, true) {
			if r, errs, _ := Resolve(&e); len(errs) == 0 {
				Publish(c, r)
			}
		}
		c.ApplyDefaults()
		if after := c.String(); after != before {
			t.Fatalf("the entries read back changed the configuration:\n%s\nwas\n%s", after, before)
		}
	})
}
