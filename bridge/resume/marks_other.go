//go:build !unix

package resume

import (
	"fmt"
	"os"
)

// Without a mapping the marks live in memory and reach the file at Sync:
// a process killed loses what changed since.

func (m *Marks) remap() error {
	size := headerSize + m.slots*m.slotSize()
	if m.mem == nil {
		b, err := os.ReadFile(m.path)
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		m.mem = b
	}
	if len(m.mem) < size {
		m.mem = append(m.mem, make([]byte, size-len(m.mem))...)
	}
	return nil
}

func (m *Marks) unmap() error { return nil }

func (m *Marks) sync() error {
	if _, err := m.file.WriteAt(m.mem, 0); err != nil {
		return fmt.Errorf("resume: %s: %w", m.path, err)
	}
	return m.file.Sync()
}
