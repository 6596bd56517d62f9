package gateway

import (
	"errors"
	"slices"
	"testing"

	"github.com/uagate/gateway/bridge/config"
)

// TestEffective: what runs after an apply in which some writer groups
// failed: next, with each failed group as it was (absent when new), and
// the endpoints only failed groups asked to change as they were.
func TestEffective(t *testing.T) {
	ep := func(name, url string) config.Endpoint { return config.Endpoint{Name: name, URL: url} }
	wg := func(name, endpoint string, writers ...string) config.WriterGroup {
		g := config.WriterGroup{Name: name, Endpoint: endpoint}
		for _, w := range writers {
			g.Writers = append(g.Writers, config.DataSetWriter{Name: w})
		}
		return g
	}
	old := &config.Config{
		Endpoints:    []config.Endpoint{ep("e1", "opc.tcp://a"), ep("e2", "opc.tcp://b")},
		WriterGroups: []config.WriterGroup{wg("a", "e1", "w"), wg("b", "e2", "w")},
	}
	fail := errors.New("refused")
	names := func(c *config.Config) (eps, groups []string) {
		for _, e := range c.Endpoints {
			eps = append(eps, e.Name+"="+e.URL)
		}
		for _, g := range c.WriterGroups {
			w := ""
			for _, x := range g.Writers {
				w += x.Name
			}
			groups = append(groups, g.Name+"@"+g.Endpoint+":"+w)
		}
		return eps, groups
	}
	for _, tc := range []struct {
		name       string
		next       *config.Config
		failed     map[string]error
		eps, grps  []string
		sameAsNext bool
	}{
		{name: "nothing failed", sameAsNext: true,
			next:   &config.Config{Endpoints: old.Endpoints, WriterGroups: []config.WriterGroup{wg("a", "e1", "w", "x")}},
			failed: map[string]error{}},
		{name: "a new group on a new endpoint fails: both absent",
			next: &config.Config{Endpoints: append(slices.Clone(old.Endpoints), ep("e3", "opc.tcp://c")),
				WriterGroups: append(slices.Clone(old.WriterGroups), wg("c", "e3", "w"))},
			failed: map[string]error{"c": fail},
			eps:    []string{"e1=opc.tcp://a", "e2=opc.tcp://b"}, grps: []string{"a@e1:w", "b@e2:w"}},
		{name: "a changed group fails: as it was, the others changed",
			next: &config.Config{Endpoints: old.Endpoints,
				WriterGroups: []config.WriterGroup{wg("a", "e1", "w", "x"), wg("b", "e2", "w", "y")}},
			failed: map[string]error{"b": fail},
			eps:    []string{"e1=opc.tcp://a", "e2=opc.tcp://b"}, grps: []string{"a@e1:wx", "b@e2:w"}},
		{name: "an endpoint change whose only group fails stays as it was",
			next: &config.Config{Endpoints: []config.Endpoint{ep("e1", "opc.tcp://a"), ep("e2", "opc.tcp://B")},
				WriterGroups: old.WriterGroups},
			failed: map[string]error{"b": fail},
			eps:    []string{"e1=opc.tcp://a", "e2=opc.tcp://b"}, grps: []string{"a@e1:w", "b@e2:w"}},
		{name: "a group moved off a removed endpoint fails: it keeps its endpoint",
			next: &config.Config{Endpoints: []config.Endpoint{ep("e1", "opc.tcp://a"), ep("e3", "opc.tcp://c")},
				WriterGroups: []config.WriterGroup{wg("a", "e1", "w"), wg("b", "e3", "w")}},
			failed: map[string]error{"b": fail},
			eps:    []string{"e1=opc.tcp://a", "e2=opc.tcp://b"}, grps: []string{"a@e1:w", "b@e2:w"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eff := effective(old, tc.next, tc.failed)
			if tc.sameAsNext {
				if eff != tc.next {
					t.Error("nothing failed: want next itself")
				}
				return
			}
			eps, grps := names(eff)
			if !slices.Equal(eps, tc.eps) || !slices.Equal(grps, tc.grps) {
				t.Errorf("endpoints %v, groups %v; want %v, %v", eps, grps, tc.eps, tc.grps)
			}
		})
	}
}
