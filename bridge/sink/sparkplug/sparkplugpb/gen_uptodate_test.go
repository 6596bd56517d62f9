package sparkplugpb

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// protocVersion is the line of the generated header that names protoc's
// version: Debian releases differ in it and nothing else, so it is left out
// of the comparison.
var protocVersion = regexp.MustCompile(`(?m)^// \tprotoc +v.*\n`)

// TestGeneratedUpToDate runs gen.sh into a temporary directory, as go
// generate would, and requires the result to equal the committed file.
func TestGeneratedUpToDate(t *testing.T) {
	tmp := t.TempDir()
	out, err := exec.Command("sh", "gen.sh", tmp).CombinedOutput()
	if err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join(tmp, "sparkplug_b.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("sparkplug_b.pb.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(protocVersion.ReplaceAll(got, nil), protocVersion.ReplaceAll(want, nil)) {
		t.Error("sparkplug_b.pb.go is out of date: run go generate ./bridge/sink/sparkplug/sparkplugpb/")
	}
	if !protocVersion.Match(want) {
		t.Errorf("the generated header names no protoc version (the pattern that leaves it out is stale):\n%s", want[:min(len(want), 800)])
	}
}
