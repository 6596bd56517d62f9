//go:build !unix

package resume

import (
	"fmt"
	"os"
)

// Without a mapping the memory is the process's and reaches the file at
// Sync: a process killed loses what changed since.

func mapFile(f *os.File, old []byte, size int, path string) ([]byte, error) {
	if old == nil {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		old = b
	}
	if len(old) < size {
		old = append(old, make([]byte, size-len(old))...)
	}
	return old, nil
}

func unmapMem([]byte, string) error { return nil }

func syncMapped(f *os.File, mem []byte, path string) error {
	if _, err := f.WriteAt(mem, 0); err != nil {
		return fmt.Errorf("resume: %s: %w", path, err)
	}
	return f.Sync()
}
