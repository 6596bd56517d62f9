package config

import (
	"os"
	"path/filepath"
)

// SavedName is the file in the state directory that keeps the configuration
// as changed through the REST API when it did not come from a YAML file,
// which the gateway would rewrite instead.
const SavedName = "gateway.yaml"

// SavedFile returns the configuration an earlier run saved in the state
// directory ($UAGATE_STATE_DIR, else DefaultStateDir: the directory of a
// configuration that names none), or "" when there is none. A run given no
// configuration loads it, so that REST API changes survive a restart.
func SavedFile() string {
	dir := os.Getenv(EnvPrefix + "STATE_DIR")
	if dir == "" {
		dir = DefaultStateDir
	}
	p := filepath.Join(dir, SavedName)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// SavePath returns where REST API changes to c are saved: file, the
// configuration file c was loaded from, when it is YAML; else (OPC
// Publisher's publishednodes.json, or no file: file is "") SavedName in c's
// state directory.
func SavePath(file string, c *Config) string {
	if file != "" {
		if data, err := readLimited(file, MaxFileSize); err == nil {
			if _, other := formatOf(data); !other {
				return file
			}
		}
	}
	return filepath.Join(c.Gateway.StateDir, SavedName)
}
