package resume

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"github.com/uagate/gateway/uastack/client"
)

// maxRecordSize bounds a resume record read back (a million items take
// about 40 MB of JSON).
const maxRecordSize = 256 << 20

// FileStore keeps resume records as one JSON file per writer group in a
// directory (the gateway's state directory): written atomically (a
// temporary file, fsync, rename, fsync of the directory), so a process
// killed at any moment leaves the previous record or the new one, never a
// torn one. Safe for concurrent use by distinct groups; a group saves from
// one goroutine.
type FileStore struct {
	Dir string
}

// NewFileStore makes the directory if needed.
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("resume: the state directory: %w", err)
	}
	return &FileStore{Dir: dir}, nil
}

// path names the file of a group; a group name may hold any character, so
// it is escaped.
func (f *FileStore) path(group string) string {
	return filepath.Join(f.Dir, url.PathEscape(group)+".json")
}

// LoadResume implements Store.
func (f *FileStore) LoadResume(group string) (Record, bool, error) {
	var rec Record
	p := f.path(group)
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, fmt.Errorf("resume: %w", err)
	}
	if fi.Size() > maxRecordSize {
		return rec, false, fmt.Errorf("resume: %s: %d bytes, more than %d", p, fi.Size(), maxRecordSize)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return rec, false, fmt.Errorf("resume: %w", err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, false, fmt.Errorf("resume: %s: %w", p, err)
	}
	return rec, true, nil
}

// SaveResume implements Store.
func (f *FileStore) SaveResume(group string, rec Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return writeAtomic(f.path(group), b)
}

// Remove deletes a group's record (the group was removed).
func (f *FileStore) Remove(group string) error {
	err := os.Remove(f.path(group))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func writeAtomic(p string, b []byte) error {
	dir := filepath.Dir(p)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p)+".*")
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	name := tmp.Name()
	fail := func(err error) error {
		tmp.Close()
		os.Remove(name)
		return fmt.Errorf("resume: writing %s: %w", p, err)
	}
	if _, err := tmp.Write(b); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return fmt.Errorf("resume: writing %s: %w", p, err)
	}
	if err := os.Rename(name, p); err != nil {
		os.Remove(name)
		return fmt.Errorf("resume: writing %s: %w", p, err)
	}
	// The rename is durable once the directory is.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// maxSessionSize bounds a session state file read back.
const maxSessionSize = 1 << 20

// sessionPath names the file of the session labelled name in dir.
func sessionPath(dir, name string) string {
	return filepath.Join(dir, url.PathEscape(name)+".session.json")
}

// SaveSession keeps what it takes to activate the session labelled name
// again from another process (client.SessionState: its authentication
// token and the server's nonce are secrets) in dir, readable by the
// gateway's user only, written atomically.
func SaveSession(dir, name string, st client.SessionState) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return writeAtomic(sessionPath(dir, name), b) // CreateTemp makes it 0600
}

// LoadSession reads what SaveSession kept (nil, nil: nothing).
func LoadSession(dir, name string) (*client.SessionState, error) {
	p := sessionPath(dir, name)
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	if fi.Size() > maxSessionSize {
		return nil, fmt.Errorf("resume: %s: %d bytes, more than %d", p, fi.Size(), maxSessionSize)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	var st client.SessionState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("resume: %s: %w", p, err)
	}
	return &st, nil
}

// RemoveSession deletes a session's file (the session was closed).
func RemoveSession(dir, name string) error {
	err := os.Remove(sessionPath(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
