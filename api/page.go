package api

import (
	"encoding/base64"
	"math"
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

// pageLimit reads ?limit=.
func pageLimit(r *http.Request) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return DefaultPageLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxPageLimit {
		return 0, fieldProblemf(ErrInvalid, "limit", "limit %q: want a number from 1 to %d", s, MaxPageLimit)
	}
	return n, nil
}

// decodeCursor reads ?cursor= into c; false when there is none. ok checks
// what was decoded.
func decodeCursor(r *http.Request, c any, ok func() bool) (bool, error) {
	s := r.URL.Query().Get("cursor")
	if s == "" {
		return false, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(raw, c)
	}
	if err != nil || !ok() {
		return false, fieldProblemf(ErrInvalid, "cursor", "cursor %q is not one this API handed out", s)
	}
	return true, nil
}

func encodeCursor(c any) string {
	raw, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// paginate cuts the page the request asks for out of items; key names an
// item uniquely.
func paginate[T any](r *http.Request, items []T, key func(*T) string) (Page[T], error) {
	limit, err := pageLimit(r)
	if err != nil {
		return Page[T]{}, err
	}
	start := 0
	var c cursor
	if found, err := decodeCursor(r, &c, func() bool { return c.Key != "" && c.Pos >= 0 && c.Pos <= math.MaxInt32 }); err != nil {
		return Page[T]{}, err
	} else if found {
		start = len(items)
		if c.Pos < len(items) {
			start = c.Pos + 1
		}
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
		p.NextCursor = encodeCursor(cursor{Key: key(&items[end-1]), Pos: end - 1})
	}
	return p, nil
}
