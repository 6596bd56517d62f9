//go:build unix

package resume

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile sizes f to size bytes and maps it, read-write and shared, in place
// of old (unmapped once the new mapping exists: when mapping fails, old
// stays usable).
func mapFile(f *os.File, old []byte, size int, path string) ([]byte, error) {
	if err := f.Truncate(int64(size)); err != nil {
		return nil, fmt.Errorf("resume: %s: %w", path, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("resume: mapping %s: %w", path, err)
	}
	if err := unmapMem(old, path); err != nil {
		_ = unix.Munmap(mem)
		return nil, err
	}
	return mem, nil
}

func unmapMem(mem []byte, path string) error {
	if mem == nil {
		return nil
	}
	if err := unix.Munmap(mem); err != nil {
		return fmt.Errorf("resume: unmapping %s: %w", path, err)
	}
	return nil
}

func syncMapped(_ *os.File, mem []byte, path string) error {
	if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
		return fmt.Errorf("resume: %s: %w", path, err)
	}
	return nil
}
