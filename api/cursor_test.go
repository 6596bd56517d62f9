package api

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

// TestBadCursors: every paged route answers a cursor it did not hand out —
// numbers beyond any list (one that overflowed answered 500), negative
// ones, wrong types, garbage — with a 400 problem naming the cursor.
func TestBadCursors(t *testing.T) {
	b := newTestBackend(t, baseConfig())
	s, ts := newTestServer(t, b, Options{})
	b.setValues("line1", fixedValues(nil))
	enc := func(js string) string { return base64.RawURLEncoding.EncodeToString([]byte(js)) }
	cursors := []string{
		enc(`{"k":"line1","i":9223372036854775807}`),
		enc(`{"k":"line1","i":9223372036854775807,"g":9223372036854775807}`),
		enc(`{"k":"line1","i":99999999999999999999999}`),
		enc(`{"k":"line1","i":-1}`),
		enc(`{"k":"line1","i":"1"}`),
		enc(`{"k":"","i":0}`),
		enc(`[]`),
		enc(`not json`),
		"!!!",
	}
	for _, rt := range s.routes {
		paged := false
		for _, q := range rt.query {
			paged = paged || q.name == "cursor"
		}
		if !paged || rt.method != "GET" {
			continue
		}
		path := strings.NewReplacer("{group}", "line1", "{writer}", "motors", "{folder}", "trusted", "{endpoint}", "plc1").Replace(rt.path)
		for _, c := range cursors {
			r := do(t, ts, "GET", path+"?cursor="+url.QueryEscape(c), "", nil)
			if r.status == 404 && strings.Contains(rt.path, "certificates") {
				continue // no store in the test backend: refused before the cursor
			}
			if r.status != 400 {
				t.Errorf("%s cursor %s: %d %s", path, c, r.status, r.body)
				continue
			}
			if p := r.problem(t); p.Field != "cursor" {
				t.Errorf("%s cursor %s: %+v", path, c, p)
			}
		}
	}
}
