package config_test

import (
	"path/filepath"
	"testing"

	"github.com/uagate/gateway/bridge/config"
)

func TestSavedFileAndSavePath(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(config.EnvPrefix+"STATE_DIR", dir)
	if p := config.SavedFile(); p != "" {
		t.Fatalf("SavedFile %q before anything was saved", p)
	}
	c := config.Default()
	c.Gateway.StateDir = dir
	saved := filepath.Join(dir, config.SavedName)
	if p := config.SavePath("", c); p != saved {
		t.Errorf("no file: SavePath %q, want %q", p, saved)
	}
	if err := config.Write(c, saved); err != nil {
		t.Fatal(err)
	}
	if p := config.SavedFile(); p != saved {
		t.Errorf("SavedFile %q, want %q", p, saved)
	}
	// A YAML file is saved to itself (publishednodes.json is not rewritten:
	// publishednodes.TestSavePath).
	if p := config.SavePath(saved, c); p != saved {
		t.Errorf("YAML: SavePath %q", p)
	}
}
