package config

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchDebounce is how long the file must be quiet before it is read: editors
// and deployment tools write a file in several steps (truncate, write, rename;
// Kubernetes swaps a symlink), and only the end result counts.
var watchDebounce = 200 * time.Millisecond

// Watch watches the configuration file at path until ctx ends. When its
// content changes it loads it as Load does; a valid configuration goes to
// onChange with its warnings, a file that does not load goes to onError with
// the *Error (the caller keeps running its current configuration). When
// onChange returns an error (the change was applied in part, or not at all)
// the content is not taken as seen: the next event on the file, a re-save
// of the same content included, calls onChange again. It watches
// the directory, not the file, so that editors that save by writing a new file
// and renaming it over the old one, and Kubernetes ConfigMap updates (a
// "..data" symlink swapped), are seen. Writes that leave the content as it was
// call nothing. The callbacks run one at a time on Watch's goroutine; a slow
// callback delays the next reload, it does not lose it.
//
// Load the file first, then Watch: the content at the time of the call is
// the reference. The returned channel is closed once the watcher stopped
// after ctx ended (or the watcher failed, which onError is told).
func Watch(ctx context.Context, path string, onChange func(*Config, []Warning) error, onError func(error)) (<-chan struct{}, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config: watch %s: %w", path, err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("config: watch %s: %w", path, err)
	}
	dir, base := filepath.Dir(abs), filepath.Base(abs)
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("config: watch %s: %w", dir, err)
	}
	last, _ := fileSum(abs) // a missing file is "no content": its creation is a change
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer w.Close()
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				name := filepath.Base(ev.Name)
				if name == base || strings.HasPrefix(name, "..") {
					timer.Reset(watchDebounce)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				onError(fmt.Errorf("config: watching %s: %w", dir, err))
			case <-timer.C:
				sum, err := fileSum(abs)
				if errors.Is(err, fs.ErrNotExist) {
					continue // removed, or between the steps of a replace: wait for it to come back
				}
				if err == nil && bytes.Equal(sum, last) {
					continue
				}
				c, warns, err := Load(path)
				if err != nil {
					onError(err)
					continue
				}
				if onChange(c, warns) == nil {
					last = sum
				} else {
					last = nil
				}
			}
		}
	}()
	return done, nil
}

// fileSum is the SHA-256 of a file's content.
func fileSum(path string) ([]byte, error) {
	b, err := readLimited(path, MaxFileSize)
	if err != nil {
		return nil, err
	}
	s := sha256.Sum256(b)
	return s[:], nil
}
