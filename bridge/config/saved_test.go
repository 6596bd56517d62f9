package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSavedFileAndSavePath(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvPrefix+"STATE_DIR", dir)
	if p := SavedFile(); p != "" {
		t.Fatalf("SavedFile %q before anything was saved", p)
	}
	c := Default()
	c.Gateway.StateDir = dir
	saved := filepath.Join(dir, SavedName)
	if p := SavePath("", c); p != saved {
		t.Errorf("no file: SavePath %q, want %q", p, saved)
	}
	if err := Write(c, saved); err != nil {
		t.Fatal(err)
	}
	if p := SavedFile(); p != saved {
		t.Errorf("SavedFile %q, want %q", p, saved)
	}
	// A YAML file is saved to itself; publishednodes.json is not rewritten.
	if p := SavePath(saved, c); p != saved {
		t.Errorf("YAML: SavePath %q", p)
	}
	pn := filepath.Join(t.TempDir(), "publishednodes.json")
	if err := os.WriteFile(pn, []byte(`[{"EndpointUrl": "opc.tcp://plc:4840", "OpcNodes": [{"Id": "ns=2;s=A"}]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if p := SavePath(pn, c); p != saved {
		t.Errorf("publishednodes.json: SavePath %q, want %q", p, saved)
	}
}
