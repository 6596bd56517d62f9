package publishednodes

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uagate/gateway/bridge/config"
)

// placement is told where publish put the parts of an entry, for a file to
// remember their positions: path is a field path of the model, node the
// index of the entry's node it came from (-1: the entry itself).
type placement func(path string, node int)

// Publish places the nodes of r in c, as OPC Publisher's PublishNodes does:
// the endpoint, writer groups and writers they need are found or created,
// and a node already in its writer under the same name takes the new
// settings. The warnings say what was renamed, split or replaced.
func Publish(c *config.Config, r *Resolved) []Issue {
	return publish(c, r, func(string, int) {})
}

func publish(c *config.Config, r *Resolved, placed placement) []Issue {
	var is issues
	ep := ensureEndpoint(c, r, &is, placed)
	base := r.groupBase(ep)
	for j := range r.Nodes {
		n := &r.Nodes[j]
		iv, writer := r.writerOf(c, ep, base, n.Interval)
		gi := ensureGroup(c, r, ep, base, iv, &is, placed)
		g := &c.WriterGroups[gi]
		gp := "writerGroups[" + strconv.Itoa(gi) + "]"
		wi := slices.IndexFunc(g.Writers, func(w config.DataSetWriter) bool { return w.Name == writer })
		if wi < 0 {
			wi = len(g.Writers)
			g.Writers = append(g.Writers, config.DataSetWriter{Name: writer})
			placed(gp+".writers["+strconv.Itoa(wi)+"]", -1)
		}
		fi := placeField(&g.Writers[wi], n, &is)
		placed(gp+".writers["+strconv.Itoa(wi)+"].fields["+strconv.Itoa(fi)+"]", j)
	}
	return is.warns
}

func (r *Resolved) groupBase(endpoint string) string {
	if r.Group != "" {
		return r.Group
	}
	return endpoint
}

// FindEndpoint returns the name of the endpoint of c that r connects as, or
// "".
func (r *Resolved) FindEndpoint(c *config.Config) string {
	for i := range c.Endpoints {
		if connectsAs(&c.Endpoints[i], &r.Endpoint) {
			return c.Endpoints[i].Name
		}
	}
	return ""
}

func ensureEndpoint(c *config.Config, r *Resolved, is *issues, placed placement) string {
	for i := range c.Endpoints {
		e := &c.Endpoints[i]
		if !connectsAs(e, &r.Endpoint) {
			continue
		}
		if pw := r.Endpoint.Identity.Password; pw.Value != "" && e.Identity.Password.Value != "" && pw.Value != e.Identity.Password.Value {
			is.warnf("OpcAuthenticationPassword", true, "endpoint %q has another password for user %q: the first one is kept", e.Name, e.Identity.Username)
		}
		return e.Name
	}
	ep := r.Endpoint
	ep.Name = config.UniqueName(endpointName(ep.URL), func(n string) bool {
		return slices.ContainsFunc(c.Endpoints, func(e config.Endpoint) bool { return e.Name == n })
	})
	c.Endpoints = append(c.Endpoints, ep)
	placed("endpoints["+strconv.Itoa(len(c.Endpoints)-1)+"]", -1)
	return ep.Name
}

// family returns the writer groups of endpoint ep that stand for the
// DataSetWriterGroup base: base itself and the groups Publish split off it.
func family(c *config.Config, ep, base string) []int {
	var out []int
	for i := range c.WriterGroups {
		if g := &c.WriterGroups[i]; g.Endpoint == ep && inFamily(g.Name, base) {
			out = append(out, i)
		}
	}
	return out
}

// writerOf returns the publishing interval and the writer of a node whose
// own (or entry's) interval is iv: a node without one goes where its writer
// already is, else to the default interval; a writer without a
// DataSetWriterId is named after its interval in milliseconds, as in OPC
// Publisher.
func (r *Resolved) writerOf(c *config.Config, ep, base string, iv time.Duration) (time.Duration, string) {
	if iv == 0 && r.Writer != "" {
		for _, i := range family(c, ep, base) {
			g := &c.WriterGroups[i]
			if slices.ContainsFunc(g.Writers, func(w config.DataSetWriter) bool { return w.Name == r.Writer }) && g.PublishingInterval > 0 {
				iv = g.PublishingInterval.D()
				break
			}
		}
	}
	if iv == 0 {
		iv = config.DefaultPublishingInterval
	}
	if r.Writer != "" {
		return iv, r.Writer
	}
	return iv, defaultWriter(iv)
}

func defaultWriter(iv time.Duration) string { return strconv.FormatInt(iv.Milliseconds(), 10) }

// ensureGroup finds or creates the writer group of endpoint ep, base and
// publishing interval iv. Ours has one endpoint and one interval (one
// subscription): a second interval becomes a group of its own, base_<iv>,
// and a name another endpoint's group has becomes base_2.
func ensureGroup(c *config.Config, r *Resolved, ep, base string, iv time.Duration, is *issues, placed placement) int {
	fam := family(c, ep, base)
	for _, i := range fam {
		if g := &c.WriterGroups[i]; g.PublishingInterval.D() == iv {
			if r.KeyFrameCount != 0 && g.KeyFrameCount != r.KeyFrameCount {
				is.warnf("DataSetKeyFrameCount", true, "writer group %q has keyFrameCount %d already: %d is ignored", g.Name, g.KeyFrameCount, r.KeyFrameCount)
			}
			if r.Format != "" && g.Format != r.Format {
				is.warnf("MessagingMode", true, "writer group %q has format %q already: %q is ignored", g.Name, g.Format, r.Format)
			}
			return i
		}
	}
	taken := func(n string) bool {
		return slices.ContainsFunc(c.WriterGroups, func(g config.WriterGroup) bool { return g.Name == n })
	}
	name := base
	switch {
	case len(fam) > 0:
		first := &c.WriterGroups[fam[0]]
		name = config.UniqueName(first.Name+"_"+config.Duration(iv).String(), taken)
		is.warnf("", false, "writer group %q has writers with publishing interval %v besides %v: they become writer group %q (one subscription per group)",
			first.Name, iv, first.PublishingInterval, name)
	case taken(base):
		name = config.UniqueName(base, taken)
		is.warnf("", false, "writer group %q is also used with another endpoint or security: this one becomes writer group %q (one endpoint per group)", base, name)
	}
	c.WriterGroups = append(c.WriterGroups, config.WriterGroup{Name: name, Endpoint: ep, PublishingInterval: config.Duration(iv),
		KeyFrameCount: r.KeyFrameCount, Format: r.Format})
	placed("writerGroups["+strconv.Itoa(len(c.WriterGroups)-1)+"]", -1)
	return len(c.WriterGroups) - 1
}

// fieldName is a field's name, or its node when it has none.
func fieldName(f *config.Field) string {
	if f.Name != "" {
		return f.Name
	}
	return f.Node
}

// placeField puts n's field in w: a field of the same node and name (as
// given: name or name_N) takes its settings, else it is added under a name
// unique in the writer.
func placeField(w *config.DataSetWriter, n *Node, is *issues) int {
	want := n.Field.Name
	for i := range w.Fields {
		f := &w.Fields[i]
		if have := fieldName(f); f.Node == n.Field.Node && (have == want || numbered(have, want)) {
			nf := n.Field
			nf.Name = f.Name
			*f = nf
			is.warnf(n.Path, false, "node %s is field %q of writer %q already: these settings replace the earlier ones", nf.Node, have, w.Name)
			return i
		}
	}
	f := n.Field
	f.Name = config.UniqueName(want, func(s string) bool {
		return slices.ContainsFunc(w.Fields, func(x config.Field) bool { return fieldName(&x) == s })
	})
	w.Fields = append(w.Fields, f)
	return len(w.Fields) - 1
}

// numbered reports whether name is base_N, as config.UniqueName makes it.
func numbered(name, base string) bool {
	rest, ok := strings.CutPrefix(name, base+"_")
	return ok && isDigits(rest)
}

// Groups returns the indexes of the writer groups of endpoint ep that r
// names: its DataSetWriterGroup's (with the groups split off it), or every
// group of ep when it names none.
func (r *Resolved) Groups(c *config.Config, ep string) []int {
	if r.Group != "" {
		return family(c, ep, r.Group)
	}
	var out []int
	for i := range c.WriterGroups {
		if c.WriterGroups[i].Endpoint == ep {
			out = append(out, i)
		}
	}
	return out
}

// writers returns the groups r names and the writers of r in them: its
// DataSetWriterId, or all writers when it has none.
func (r *Resolved) writers(c *config.Config) ([]int, func(*config.DataSetWriter) bool, error) {
	ep := r.FindEndpoint(c)
	if ep == "" {
		return nil, nil, &Issue{Path: "EndpointUrl", Err: ErrNotFound,
			Message: fmt.Sprintf("no endpoint %s with this security and user is configured", r.Endpoint.URL)}
	}
	gs := r.Groups(c, ep)
	if len(gs) == 0 {
		return nil, nil, &Issue{Path: "DataSetWriterGroup", Err: ErrNotFound, Message: fmt.Sprintf("endpoint %q has no writer group %q", ep, r.Group)}
	}
	return gs, func(w *config.DataSetWriter) bool { return r.Writer == "" || w.Name == r.Writer }, nil
}

// Unpublish removes the nodes of r from the writers it names, as OPC
// Publisher's UnpublishNodes: a node that none of them has is an error
// (ErrNotFound), which leaves c partly changed (run it on a copy, as the
// API's ApplyConfig does). Writers and groups left empty go.
func Unpublish(c *config.Config, r *Resolved) error {
	gs, match, err := r.writers(c)
	if err != nil {
		return err
	}
	for _, n := range r.Nodes {
		found := false
		for _, gi := range gs {
			g := &c.WriterGroups[gi]
			for wi := range g.Writers {
				if w := &g.Writers[wi]; match(w) {
					before := len(w.Fields)
					w.Fields = slices.DeleteFunc(w.Fields, func(f config.Field) bool { return f.Node == n.Field.Node })
					found = found || len(w.Fields) < before
				}
			}
		}
		if !found {
			return &Issue{Path: n.Path, Err: ErrNotFound, Message: fmt.Sprintf("node %s is not published on %s", n.Field.Node, r.Endpoint.URL)}
		}
	}
	DropEmpty(c)
	return nil
}

// UnpublishAll removes the writers r names (OPC Publisher's
// UnpublishAllNodes); a nil r removes every writer group.
func UnpublishAll(c *config.Config, r *Resolved) error {
	if r == nil {
		c.WriterGroups = nil
		return nil
	}
	gs, match, err := r.writers(c)
	if err != nil {
		return err
	}
	for _, gi := range gs {
		g := &c.WriterGroups[gi]
		g.Writers = slices.DeleteFunc(g.Writers, func(w config.DataSetWriter) bool { return match(&w) })
	}
	DropEmpty(c)
	return nil
}

// Replace sets the nodes of the entries' writers to theirs (OPC
// Publisher's AddOrUpdateEndpoints): each writer's fields go from every
// group of its family, then the entries are published, so that entries of
// one writer add up as in a file (into the writer and group it had, when an
// entry gives no interval). A writer left without nodes goes.
func Replace(c *config.Config, rs ...*Resolved) []Issue {
	for _, r := range rs {
		ep := r.FindEndpoint(c)
		if ep == "" {
			continue
		}
		names := map[string]bool{}
		if r.Writer != "" {
			names[r.Writer] = true
		} else {
			for _, n := range r.Nodes {
				names[defaultWriter(cmp.Or(n.Interval, config.DefaultPublishingInterval))] = true
			}
			names[defaultWriter(cmp.Or(r.Interval, config.DefaultPublishingInterval))] = true
		}
		for _, gi := range family(c, ep, r.groupBase(ep)) {
			g := &c.WriterGroups[gi]
			for wi := range g.Writers {
				if names[g.Writers[wi].Name] {
					g.Writers[wi].Fields = nil
				}
			}
		}
	}
	var warns []Issue
	for _, r := range rs {
		warns = append(warns, Publish(c, r)...)
	}
	DropEmpty(c)
	return warns
}

// DropEmpty removes writers without fields (or browse selections) and
// groups without writers, as OPC Publisher forgets an entry whose last node
// is gone.
func DropEmpty(c *config.Config) {
	for gi := range c.WriterGroups {
		g := &c.WriterGroups[gi]
		g.Writers = slices.DeleteFunc(g.Writers, func(w config.DataSetWriter) bool { return len(w.Fields) == 0 && len(w.Browse) == 0 })
	}
	c.WriterGroups = slices.DeleteFunc(c.WriterGroups, func(g config.WriterGroup) bool { return len(g.Writers) == 0 })
}

// Nodes returns the nodes of the writers r names (OPC Publisher's
// GetConfiguredNodesOnEndpoint).
func Nodes(c *config.Config, r *Resolved) ([]OpcNode, error) {
	gs, match, err := r.writers(c)
	if err != nil {
		return nil, err
	}
	out := []OpcNode{}
	for _, gi := range gs {
		for wi := range c.WriterGroups[gi].Writers {
			if w := &c.WriterGroups[gi].Writers[wi]; match(w) {
				out = append(out, OpcNodes(w)...)
			}
		}
	}
	return out, nil
}
