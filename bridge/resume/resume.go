package resume

import (
	"context"
	"time"

	"github.com/uagate/gateway/uastack/client"
)

// Record is what a Store keeps per writer group.
type Record struct {
	// Fingerprint of the group's monitored items, in handle order.
	Fingerprint string `json:"fingerprint"`
	// ServerStart is the server's ServerStatus.StartTime (UA DateTime) when
	// the record was saved: a server that restarted numbers its
	// subscriptions anew, and an id from before could name another one.
	ServerStart int64              `json:"serverStart"`
	State       client.ResumeState `json:"state"`
	Saved       time.Time          `json:"saved"`
	// Writers are, in a record another replica may take over (a shared
	// Store), where each dataset writer's SequenceNumbers may go on: beyond
	// any its holder can have used before it stops, so that a takeover
	// never uses one twice. A restart on the same machine goes on from its
	// Marks instead, exactly.
	Writers []WriterSeq `json:"writers,omitempty"`
	// Marks names the writer group (a process's) whose Marks were kept
	// beside this record: a restart whose marks carry the same value finds
	// in them, exactly, where the group stopped; others go on from Writers.
	Marks uint64 `json:"marks,omitempty"`
	// Handed is, in a shared record, the last notification message of
	// State's subscription its holder had handed to its queues when it
	// saved the record: a holder that takes the group over sends what the
	// server republishes up to it to the at-least-once queues only (the
	// at-most-once ones had it), marked redelivered.
	Handed uint32 `json:"handed,omitempty"`
}

// WriterSeq is a dataset writer's continuation point in a Record.
type WriterSeq struct {
	Name   string `json:"name"`
	Seq    uint32 `json:"seq"`
	Frames uint64 `json:"frames"`
}

// Store keeps writer groups' resume records: a state file (a restart), or a
// lease in a shared store (another replica takes over). Its methods may be
// called from any goroutine. Save may keep r, but must not modify
// r.State.Items: the slice is the client's, shared by every record saved
// while the items stay as they are (client.Subscription.ResumeState).
type Store interface {
	LoadResume(group string) (Record, bool, error)
	SaveResume(group string, r Record) error
}

// DurableStore is a Store whose SaveResume keeps a record before it is
// where a successor reads it (a lease written with its next renewal):
// SaveResumeNow returns once it is. A writer group saves its reservation of
// SequenceNumbers this way before it uses them, so that a successor after
// a crash never goes on from an older reservation.
type DurableStore interface {
	Store
	SaveResumeNow(ctx context.Context, group string, r Record) error
}
