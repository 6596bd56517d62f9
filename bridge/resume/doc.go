// Package resume holds what a writer group needs to resume its OPC UA
// subscription after a restart, or on another replica: the Record (the
// client's ResumeState and a fingerprint of the group's items), the Store
// interface a group saves it through, FileStore, the state directory's
// store (one JSON file per group, written atomically), Marks, a small file
// per group mapped into memory that keeps, to the last notification
// message, where the group stopped (its writers' SequenceNumbers, the last
// message handed to its queues) without a system call on the hot path,
// Times, mapped the same way (each field's last delivered source timestamp),
// and SaveSession/LoadSession, the sessions' states (client.SessionState,
// mode 0600) for a restart to activate them again.
//
// bridge (the writer group) saves and loads records; bridge/lease's KV is
// the Store of a scaled-out gateway (the record travels in the lease's
// value). Both import this package; it imports neither.
//
// Ownership: a Store keeps nothing of a record it is given that it could
// modify; the record's item list is the client's and shared (see Store).
// Marks belong to one writer group, which calls their setters under its
// own lock.
package resume
