package pooling

import "sync/atomic"

// Shared is a pooled buffer with a reference count, for one encoded message
// fanned out to several sinks: each holder of a reference calls Release once
// when done, and the last Release returns the buffer and the Shared itself to
// their pools. The bytes must not be modified once a second reference exists.
type Shared struct {
	Header
	refs atomic.Int32
	buf  *Buffer
	pool *BufferPool // set once; a Shared only ever lives in this pool
}

// GetShared returns a Shared holding a buffer of len n from bp (see Get),
// with one reference owned by the caller.
func (bp *BufferPool) GetShared(n int) *Shared {
	return bp.NewShared(bp.Get(n))
}

// NewShared wraps b, which the caller owns, in a Shared with one reference
// owned by the caller. Ownership of b moves into the Shared: the caller must
// no longer Put b, and the last Release gives b back to bp. b should come from
// bp; one that does not fit its classes is dropped on the last Release.
func (bp *BufferPool) NewShared(b *Buffer) *Shared {
	s := bp.shared.Get()
	if s.pool == nil {
		s.pool = bp
	}
	s.buf = b
	s.refs.Store(1)
	return s
}

// Bytes returns the shared bytes. They are valid until the caller's Release;
// after it the slice must not be used, as the array goes back to the pool.
func (s *Shared) Bytes() []byte {
	if s.buf == nil {
		return nil
	}
	return s.buf.B
}

// Len returns len(s.Bytes()).
func (s *Shared) Len() int { return len(s.Bytes()) }

// Retain adds a reference, to be handed to another holder together with s.
// Only a holder of a reference may call it. Retaining a Shared whose last
// reference was already released would resurrect a buffer that may have been
// handed to someone else, so it is ignored and counted as a dead retain.
func (s *Shared) Retain() {
	for {
		r := s.refs.Load()
		if r <= 0 {
			s.pool.deadRetains.Add(1)
			return
		}
		if s.refs.CompareAndSwap(r, r+1) {
			return
		}
	}
}

// Release gives up the caller's reference; the caller must not use s or its
// bytes afterwards. The last Release returns the buffer and s to the pool.
// Releasing once more than retained is ignored and counted as an over-release
// rather than driving the count negative, so it cannot put the buffer back
// twice. It is detected while s sits idle; once the pool has handed s to a new
// owner, a stale Release takes that owner's reference and cannot be told
// apart from a legitimate one.
func (s *Shared) Release() {
	for {
		r := s.refs.Load()
		if r <= 0 {
			s.pool.overReleases.Add(1)
			return
		}
		if s.refs.CompareAndSwap(r, r-1) {
			if r == 1 {
				s.free()
			}
			return
		}
	}
}

func (s *Shared) free() {
	bp, b := s.pool, s.buf
	s.buf = nil
	bp.Put(b)
	bp.shared.Put(s)
}
