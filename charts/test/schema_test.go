package charttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestSchemaCoversValues checks that values.schema.json and values.yaml name
// the same keys: a key added to values.yaml but not to the schema would be
// refused by the schema's additionalProperties, one left in the schema after
// its value was removed would document nothing.
func TestSchemaCoversValues(t *testing.T) {
	var values map[string]any
	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	data, err = os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	var compare func(path string, v map[string]any, s map[string]any)
	compare = func(path string, v map[string]any, s map[string]any) {
		props, _ := s["properties"].(map[string]any)
		if props == nil {
			return // an open object (a Kubernetes type or the gateway's config)
		}
		if s["additionalProperties"] != false {
			t.Errorf("schema %s: properties without additionalProperties: false", path)
		}
		for _, k := range sortedKeys(v) {
			ps, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("values.yaml %s%s: not in values.schema.json", path, k)
				continue
			}
			if sub, ok := v[k].(map[string]any); ok {
				compare(path+k+".", sub, ps)
			}
		}
		for _, k := range sortedKeys(props) {
			if _, ok := v[k]; !ok && !(path == "" && k == "global") {
				t.Errorf("values.schema.json %s%s: not in values.yaml", path, k)
			}
		}
	}
	compare("", values, schema)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := keys(m)
	sort.Strings(ks)
	return ks
}
