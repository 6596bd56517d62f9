//go:build unix

package resume

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// remap sizes the file for m.slots and maps it (again); m.mu held for
// writing, or the marks not shared yet.
func (m *Marks) remap() error {
	size := headerSize + m.slots*m.slotSize()
	if err := m.file.Truncate(int64(size)); err != nil {
		return fmt.Errorf("resume: %s: %w", m.path, err)
	}
	// The new mapping first: when it fails, the old one stays usable.
	mem, err := unix.Mmap(int(m.file.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("resume: mapping %s: %w", m.path, err)
	}
	if err := m.unmap(); err != nil {
		return err
	}
	m.mem = mem
	return nil
}

func (m *Marks) unmap() error {
	if m.mem == nil {
		return nil
	}
	err := unix.Munmap(m.mem)
	m.mem = nil
	if err != nil {
		return fmt.Errorf("resume: unmapping %s: %w", m.path, err)
	}
	return nil
}

func (m *Marks) sync() error {
	if err := unix.Msync(m.mem, unix.MS_SYNC); err != nil {
		return fmt.Errorf("resume: %s: %w", m.path, err)
	}
	return nil
}
