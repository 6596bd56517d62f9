package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: whatever the file, Parse returns a configuration or an *Error,
// never panics; what it accepts validates and equals itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{minimal, validBase, diffOld, diffNew, "", "gateway: {", "[1, 2]", "x-a: &a {queueSize: 1}\nwriterGroups: [{name: g, nodes: *a}]"} {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob("testdata/*.json")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := parse(data, "fuzz.yaml", noEnv, nil)
		if err != nil {
			if Issues(err) == nil {
				t.Fatalf("error %T is not a *config.Error: %v", err, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted, but Validate fails: %v", err)
		}
		if d := Diff(c, c); !d.Empty() {
			t.Fatalf("Diff with itself: %v", d)
		}
		_ = c.String()
	})
}
