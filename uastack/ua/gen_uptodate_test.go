package ua

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedUpToDate regenerates the *_gen.go files into a temporary directory,
// as go generate would, and requires them to equal the committed ones byte for byte.
func TestGeneratedUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator with go run")
	}
	tmp := t.TempDir()
	cmd := exec.Command("go", "run", "../internal/gen", "-schema", "../schema", "-out", tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, out)
	}
	fresh, err := filepath.Glob(filepath.Join(tmp, "*_gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob("*_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh) != len(committed) {
		t.Errorf("generator writes %d files, the package has %d *_gen.go files", len(fresh), len(committed))
	}
	for _, path := range fresh {
		name := filepath.Base(path)
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s: %v (run go generate ./uastack/ua/)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is out of date: run go generate ./uastack/ua/", name)
		}
	}
}
