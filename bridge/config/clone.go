package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
)

// Clone returns a deep copy of c: slices, maps and pointers are copied, so
// that changing the copy (as a REST change does before it is validated)
// never touches c. Resolved secrets are copied with their values.
func (c *Config) Clone() *Config {
	if c == nil {
		return nil
	}
	out := new(Config)
	deepCopy(reflect.ValueOf(out).Elem(), reflect.ValueOf(c).Elem())
	return out
}

// deepCopy copies src into dst (both settable values of one type). A struct is
// assigned as a whole first (which copies its unexported fields, such as a
// Secret's resolved value), then its exported fields that hold references are
// copied again in depth.
func deepCopy(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			dst.SetZero()
			return
		}
		p := reflect.New(src.Elem().Type())
		deepCopy(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Slice:
		if src.IsNil() {
			dst.SetZero()
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			deepCopy(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			dst.SetZero()
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		it := src.MapRange()
		for it.Next() {
			v := reflect.New(it.Value().Type()).Elem()
			deepCopy(v, it.Value())
			m.SetMapIndex(it.Key(), v)
		}
		dst.Set(m)
	case reflect.Struct:
		dst.Set(src)
		for i := range src.NumField() {
			if src.Type().Field(i).IsExported() {
				deepCopy(dst.Field(i), src.Field(i))
			}
		}
	default:
		dst.Set(src)
	}
}

// Save writes c as YAML to path (StoreSecrets, then Write) and returns the
// configuration as written, to become the running one so that the file
// watcher finds nothing to change. c itself is not changed.
func Save(c *Config, path, secretsDir string) (*Config, error) {
	out, err := StoreSecrets(c, secretsDir)
	if err != nil {
		return nil, err
	}
	if err := Write(out, path); err != nil {
		return nil, err
	}
	return out, nil
}

// StoreSecrets returns a copy of c whose inline secrets (ones given by
// value, as the API takes passwords) are written to files of their own under
// secretsDir (mode 0600) and referenced as {file: …}, so that the YAML Write
// makes never holds a secret. Secrets from a file or the environment keep
// where they come from.
func StoreSecrets(c *Config, secretsDir string) (*Config, error) {
	out := c.Clone()
	for _, ref := range out.secrets() {
		s := ref.secret
		if s.Value == "" || s.File != "" || s.Env != "" {
			continue
		}
		if err := os.MkdirAll(secretsDir, 0o700); err != nil {
			return nil, fmt.Errorf("config: saving secrets: %w", err)
		}
		sum := sha256.Sum256([]byte(ref.path))
		name := filepath.Join(secretsDir, strings.Map(func(r rune) rune {
			if r == '[' || r == ']' || r == '.' {
				return '-'
			}
			return r
		}, ref.path)+"-"+hex.EncodeToString(sum[:4]))
		if err := writeAtomic(name, []byte(s.Reveal()), 0o600); err != nil {
			return nil, fmt.Errorf("config: saving secret %s: %w", ref.path, err)
		}
		s.File, s.Value = name, ""
	}
	return out, nil
}

// Write writes c as YAML to path, atomically (a temporary file renamed over
// it), so that a restart finds what the running gateway was changed to (by
// the REST API). An inline secret is written as it is: StoreSecrets first.
func Write(c *Config, path string) error {
	b, err := yaml.MarshalWithOptions(c, yaml.Indent(2), yaml.OmitEmpty())
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	head := "# Written by the gateway (REST API changes); edits are picked up while it runs.\n"
	return writeAtomic(path, append([]byte(head), b...), 0o600)
}

// writeAtomic writes data to a temporary file beside path, syncs it and
// renames it over path.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename: nothing there
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
