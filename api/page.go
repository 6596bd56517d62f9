package api

import (
	"encoding/base64"
	"net/http"
	"strconv"

	json "github.com/goccy/go-json"
)

// Lists are answered a page at a time: ?limit= (default DefaultPageLimit, at
// most MaxPageLimit) and ?cursor= (the nextCursor of the previous page). A
// cursor names the last item of its page by key and position, so a page
// continues after that item even when items before it were removed.

// Page sizes.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// Page is one page of a list.
type Page[T any] struct {
	Items []T `json:"items"`
	// NextCursor continues the list; absent on the last page.
	NextCursor string `json:"nextCursor,omitempty"`
}

type cursor struct {
	Key string `json:"k"`
	Pos int    `json:"i"`
}

// paginate cuts the page the request asks for out of items; key names an
// item uniquely.
func paginate[T any](r *http.Request, items []T, key func(*T) string) (Page[T], error) {
	q := r.URL.Query()
	limit := DefaultPageLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageLimit {
			return Page[T]{}, fieldProblemf(ErrInvalid, "limit", "limit %q: want a number from 1 to %d", s, MaxPageLimit)
		}
		limit = n
	}
	start := 0
	if s := q.Get("cursor"); s != "" {
		raw, err := base64.RawURLEncoding.DecodeString(s)
		var c cursor
		if err == nil {
			err = json.Unmarshal(raw, &c)
		}
		if err != nil || c.Pos < 0 {
			return Page[T]{}, fieldProblemf(ErrInvalid, "cursor", "cursor %q is not one this API handed out", s)
		}
		start = min(c.Pos+1, len(items))
		// The item may have moved: continue after it where it is now.
		if c.Pos < len(items) && key(&items[c.Pos]) == c.Key {
			start = c.Pos + 1
		} else {
			for i := range items {
				if key(&items[i]) == c.Key {
					start = i + 1
					break
				}
			}
		}
	}
	end := min(start+limit, len(items))
	p := Page[T]{Items: items[start:end]}
	if p.Items == nil {
		p.Items = []T{}
	}
	if end < len(items) {
		raw, _ := json.Marshal(cursor{Key: key(&items[end-1]), Pos: end - 1})
		p.NextCursor = base64.RawURLEncoding.EncodeToString(raw)
	}
	return p, nil
}
