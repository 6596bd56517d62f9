package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"sync"
	"time"

	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

// Browse continuation points live in the upstream server's session, which
// every API caller shares, and the server keeps only a few per session
// (MaxBrowseContinuationPoints). The API therefore holds them itself: the
// caller gets an opaque id, valid for the caller that browsed and the
// session it browsed on; each caller holds at most maxCPPerCaller per
// endpoint (browsing again releases its oldest upstream), and one unused
// for cpIdle is released by the next browse of the endpoint. A continuation
// point used by BrowseNext is consumed by the server; the one it answers
// with is registered anew.

const (
	maxCPPerCaller = 4
	cpIdle         = time.Minute
)

type cpEntry struct {
	endpoint, owner string
	session         [8]byte // the session it belongs to (sessionTag)
	cp              []byte
	used            time.Time
}

type cpRegistry struct {
	mu sync.Mutex
	m  map[string]*cpEntry // by id
}

// sessionTag identifies the session a continuation point belongs to.
func sessionTag(c *client.Client) [8]byte {
	h := sha256.Sum256([]byte(c.SessionID().String()))
	return [8]byte(h[:8])
}

// add registers cp for owner on endpoint (session c) and returns its id;
// "" for no continuation point. The continuation points to release upstream
// now (the owner's beyond the bound, the idle ones of this session) are
// released on c before it returns.
func (r *cpRegistry) add(ctx context.Context, endpoint, owner string, c *client.Client, cp []byte) string {
	now := time.Now()
	tag := sessionTag(c)
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]*cpEntry{}
	}
	var release [][]byte
	var mine []string
	for id, e := range r.m {
		if e.endpoint != endpoint {
			continue
		}
		switch {
		case e.session != tag:
			delete(r.m, id) // ended with its session
		case now.Sub(e.used) > cpIdle:
			release = append(release, e.cp)
			delete(r.m, id)
		case e.owner == owner:
			mine = append(mine, id)
		}
	}
	// The owner's oldest go first once it holds the most it may.
	slices.SortFunc(mine, func(a, b string) int { return r.m[a].used.Compare(r.m[b].used) })
	for len(cp) > 0 && len(mine) >= maxCPPerCaller {
		release = append(release, r.m[mine[0]].cp)
		delete(r.m, mine[0])
		mine = mine[1:]
	}
	id := ""
	if len(cp) > 0 {
		var raw [18]byte
		_, _ = rand.Read(raw[:])
		id = base64.RawURLEncoding.EncodeToString(raw[:])
		r.m[id] = &cpEntry{endpoint: endpoint, owner: owner, session: tag, cp: cp, used: now}
	}
	r.mu.Unlock()
	if len(release) > 0 {
		// Best effort: a failure leaves them to the session's end.
		_, _ = c.BrowseNext(ctx, &ua.BrowseNextRequest{ReleaseContinuationPoints: true, ContinuationPoints: release})
	}
	return id
}

// take removes and returns the continuation point id names, for owner on
// endpoint and session c.
func (r *cpRegistry) take(endpoint, owner string, c *client.Client, id string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[id]
	if e == nil || e.endpoint != endpoint || e.owner != owner {
		return nil, fieldProblemf(ErrInvalid, "/continuationPoint", "not a continuation point this API handed out to this caller (or it was released: unused for %v, or beyond the %d a caller may hold)", cpIdle, maxCPPerCaller)
	}
	delete(r.m, id)
	if e.session != sessionTag(c) {
		return nil, fieldProblemf(ErrConflict, "/continuationPoint", "the session that issued this continuation point has ended; browse again")
	}
	return e.cp, nil
}

// held counts the continuation points registered for endpoint.
func (r *cpRegistry) held(endpoint string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.m {
		if e.endpoint == endpoint {
			n++
		}
	}
	return n
}
