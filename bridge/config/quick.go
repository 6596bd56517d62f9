package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/uagate/gateway/uastack/ua"
)

// NodeFields parses a comma-separated list of node ids (the -nodes flag of
// `gateway run`) into fields named by their ids; an empty list gives the
// fields of the default configuration (the simulation server's Demo
// variables).
func NodeFields(list string) ([]Field, error) {
	var out []Field
	if list == "" {
		for _, f := range Default().WriterGroups[0].Writers[0].Fields {
			out = append(out, Field{Name: f.Name, Node: f.Node})
		}
		return out, nil
	}
	seen := map[string]bool{}
	for _, x := range strings.Split(list, ",") {
		if x = strings.TrimSpace(x); x == "" {
			continue
		}
		if _, err := ua.ParseExpandedNodeID(x); err != nil {
			return nil, fmt.Errorf("%q is not a node id: %v", x, err)
		}
		if seen[x] {
			return nil, fmt.Errorf("%q given twice", x)
		}
		seen[x] = true
		out = append(out, Field{Name: x, Node: x})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no node ids in %q", list)
	}
	return out, nil
}

// OneGroupText is the YAML text of a configuration with one endpoint and one
// writer group ("run", writer "gateway") publishing fields every interval,
// to go through Parse as a file would (environment overrides, defaults,
// validation). Unlike Marshal it carries the secrets' values: the text is
// for Parse only, never for a file or a log.
func OneGroupText(ep Endpoint, fields []Field, interval time.Duration) ([]byte, error) {
	c := Config{
		Endpoints: []Endpoint{ep},
		WriterGroups: []WriterGroup{{Name: "run", PublishingInterval: Duration(interval),
			Writers: []DataSetWriter{{Name: "gateway", Fields: fields}}}},
	}
	secret := yaml.CustomMarshaler[Secret](func(s Secret) ([]byte, error) {
		return yaml.Marshal(struct {
			Value string `yaml:"value,omitempty"`
			Env   string `yaml:"env,omitempty"`
		}{s.Value, s.Env})
	})
	return yaml.MarshalWithOptions(&c, yaml.Indent(2), yaml.OmitEmpty(), secret)
}
