package charttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
)

// The values reference in the chart's README sits between these markers and
// is generated from values.yaml: a key with a "# --" comment is a row (its
// path, type, default and the comment), a mapping without one is descended
// into, anything else is an undocumented value and an error.
const (
	tableBegin = "<!-- values:begin (generated from values.yaml by charts/test; UPDATE_README=1 go test -run TestReadme rewrites it) -->"
	tableEnd   = "<!-- values:end -->"
)

// TestReadmeValues fails when values.yaml has a value without a "# --"
// description or when the README's values reference differs from what
// values.yaml says (a key added, removed, renamed, its default or its
// description changed). With UPDATE_README=1 it rewrites the table instead.
func TestReadmeValues(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	table, err := valuesTable(data)
	if err != nil {
		t.Fatal(err)
	}
	readmePath := filepath.Join(chartDir, "README.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	begin := bytes.Index(readme, []byte(tableBegin))
	end := bytes.Index(readme, []byte(tableEnd))
	if begin < 0 || end < begin {
		t.Fatalf("%s: no %q … %q section", readmePath, tableBegin, tableEnd)
	}
	current := string(readme[begin+len(tableBegin) : end])
	want := "\n" + table
	if current == want {
		return
	}
	if os.Getenv("UPDATE_README") != "" {
		out := append([]byte{}, readme[:begin+len(tableBegin)]...)
		out = append(out, want...)
		out = append(out, readme[end:]...)
		if err := os.WriteFile(readmePath, out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the values reference in %s", readmePath)
		return
	}
	t.Errorf("the values reference in %s is not what values.yaml says (UPDATE_README=1 go test -run TestReadme rewrites it); differing rows:\n%s",
		readmePath, lineDiff(current, want))
}

// TestValuesTableRejectsUndocumented checks the generator's own rule on a
// small document: an undocumented leaf is an error naming its path.
func TestValuesTableRejectsUndocumented(t *testing.T) {
	doc := "a:\n  # -- documented\n  b: 1\n  c: x\n"
	if _, err := valuesTable([]byte(doc)); err == nil || !strings.Contains(err.Error(), "a.c") {
		t.Fatalf("want an error naming a.c, got %v", err)
	}
	doc = "# -- A map.\n# Second line | with a bar.\nm:\n  k: v\nn:\n  # -- Empty list.\n  l: []\n"
	got, err := valuesTable([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := "| Key | Type | Default | Description |\n|---|---|---|---|\n" +
		"| `m` | object | `{\"k\":\"v\"}` | A map. Second line \\| with a bar. |\n" +
		"| `n.l` | list | `[]` | Empty list. |\n"
	if got != want {
		t.Fatalf("table:\n%s\nwant:\n%s", got, want)
	}
}

func valuesTable(data []byte) (string, error) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return "", fmt.Errorf("values.yaml: %w", err)
	}
	if doc.Kind != yamlv3.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yamlv3.MappingNode {
		return "", fmt.Errorf("values.yaml: not a mapping")
	}
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Description |\n|---|---|---|---|\n")
	var errs []string
	var walk func(m *yamlv3.Node, prefix string)
	walk = func(m *yamlv3.Node, prefix string) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			path := prefix + k.Value
			desc, ok := description(k.HeadComment)
			switch {
			case ok:
				var val any
				if err := v.Decode(&val); err != nil {
					errs = append(errs, fmt.Sprintf("%s: %v", path, err))
					continue
				}
				def, err := json.Marshal(val)
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s: %v", path, err))
					continue
				}
				fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", path, typeName(val), cell(string(def)), cell(desc))
			case v.Kind == yamlv3.MappingNode && len(v.Content) > 0:
				walk(v, path+".")
			default:
				errs = append(errs, fmt.Sprintf("%s (line %d): no \"# --\" description", path, k.Line))
			}
		}
	}
	walk(doc.Content[0], "")
	if len(errs) > 0 {
		return "", fmt.Errorf("values.yaml:\n  %s", strings.Join(errs, "\n  "))
	}
	return b.String(), nil
}

// description returns the text of a "# --" comment block (the lines from
// "# --" on, joined), and whether there is one.
func description(comment string) (string, bool) {
	var words []string
	found := false
	for _, line := range strings.Split(comment, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "# --"):
			found = true
			words = append(words[:0], strings.TrimSpace(strings.TrimPrefix(line, "# --")))
		case found && strings.HasPrefix(line, "#"):
			words = append(words, strings.TrimSpace(strings.TrimPrefix(line, "#")))
		case found && line == "":
			// A blank line ends the block; a later "# --" starts a new one.
			found = len(words) > 0
		}
	}
	return strings.Join(words, " "), found
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int, int64, uint64:
		return "int"
	case float64:
		return "float"
	case bool:
		return "bool"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// cell escapes what would end a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// lineDiff lists the lines only in a (-) and only in b (+).
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ina, inb := in(a), in(b)
	var out strings.Builder
	for _, l := range strings.Split(a, "\n") {
		if !inb[l] {
			fmt.Fprintf(&out, "- %s\n", l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ina[l] {
			fmt.Fprintf(&out, "+ %s\n", l)
		}
	}
	return out.String()
}
