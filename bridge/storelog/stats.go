package storelog

import "os"

// Stats are the log's counters and its streams'.
type Stats struct {
	// Bytes is what the records take in the file, MaxBytes its bound;
	// FileBytes is the file's size on disk (bbolt reuses freed pages but
	// does not shrink the file).
	Bytes     int64 `json:"bytes"`
	MaxBytes  int64 `json:"maxBytes"`
	FileBytes int64 `json:"fileBytes"`
	// Commits counts the transactions committed, Syncs the fdatasyncs,
	// CommitErrors the failed commits (the first stops the log);
	// CommitNanos is the time spent committing; WrittenBytes what the
	// commits wrote to the file (pages, as far as they are used; 0 when
	// bbolt's page writer could not be wrapped, see pagewrite.go).
	Commits      uint64        `json:"commits"`
	Syncs        uint64        `json:"syncs"`
	CommitErrors uint64        `json:"commitErrors"`
	CommitNanos  int64         `json:"commitNanos"`
	WrittenBytes uint64        `json:"writtenBytes"`
	Streams      []StreamStats `json:"streams"`
}

// Stats returns the log's counters and every stream's.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	st := Stats{Bytes: l.bytes, MaxBytes: l.opts.MaxBytes}
	l.mu.Unlock()
	st.Commits, st.Syncs, st.CommitErrors = l.commits.Load(), l.syncs.Load(), l.commitErrors.Load()
	st.CommitNanos, st.WrittenBytes = l.commitNanos.Load(), l.written.Load()
	if fi, err := os.Stat(l.path); err == nil {
		st.FileBytes = fi.Size()
	}
	for _, s := range l.snapshot() {
		st.Streams = append(st.Streams, s.Stats())
	}
	return st
}
