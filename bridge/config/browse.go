package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

// ErrBrowseLimit: ExpandBrowse visited more nodes than it may keep track of
// (a server with a huge or endless address space below the root); the fields
// found until then are returned with it.
var ErrBrowseLimit = errors.New("config: browse visited too many nodes")

// browseBatch is the number of nodes browsed (and DataType attributes read)
// per call; the client splits each call further to fit the server's
// operation limits.
const browseBatch = 500

// maxVisited bounds the nodes ExpandBrowse remembers, whatever the server
// declares.
func maxVisited(maxNodes int) int { return min(10*maxNodes+10000, 2*MaxBrowseNodes) }

type browseCand struct {
	id   ua.NodeID
	path []string // browse names from below the root
	name string   // DisplayName, else BrowseName
}

// ExpandBrowse returns a field for every Variable below sel.Root, down to
// sel.Depth levels, whose BrowseName matches sel.Name (path.Match) and, when
// sel.DataTypes is set, whose DataType is one of them (exactly; the DataType
// attributes are read in batches). Properties (HasProperty) are metadata, not
// data, and are left out, as are nodes in other servers or unknown
// namespaces. It stops at sel.MaxNodes fields. The order is the browse path's
// (alphabetical per level), so that it is the same on every run however the
// server orders its references; the field names are the DisplayNames, made
// unique in the result with _2, _3 …; the node ids are written with nsu=
// namespace URIs, which survive a change of the server's namespace indexes.
// Unset settings of sel take their defaults. progress, when not nil, is
// called after each batch with the fields found and the references visited.
func ExpandBrowse(ctx context.Context, c *client.Client, sel BrowseSelect, progress func(found, visited int)) ([]Field, error) {
	setInt(&sel.Depth, DefaultBrowseDepth)
	setString(&sel.Name, "*")
	setInt(&sel.MaxNodes, DefaultBrowseMaxNodes)
	v := &validator{}
	w := DataSetWriter{Browse: []BrowseSelect{sel}}
	w.validate(v, "")
	for _, is := range v.errs {
		if strings.HasPrefix(is.Path, ".browse") {
			return nil, fmt.Errorf("config: browse %s: %s: %s", sel.Root, strings.TrimPrefix(is.Path, ".browse[0]."), is.Message)
		}
	}
	ns := c.Namespaces()
	rx, _ := ua.ParseExpandedNodeID(sel.Root)
	root, err := rx.Resolve(ns)
	if err != nil {
		return nil, fmt.Errorf("config: browse root %s: %w", sel.Root, err)
	}
	var types map[ua.NodeID]bool
	if len(sel.DataTypes) > 0 {
		types = map[ua.NodeID]bool{}
		for _, s := range sel.DataTypes {
			x, _ := ParseDataType(s)
			id, err := x.Resolve(ns)
			if err != nil {
				return nil, fmt.Errorf("config: browse data type %s: %w", s, err)
			}
			types[id] = true
		}
	}

	type item struct {
		id   ua.NodeID
		path []string
	}
	seen := map[ua.NodeID]bool{root: true}
	frontier := []item{{id: root}}
	var found []browseCand
	visited := 0
	limit := maxVisited(sel.MaxNodes)
	var limitErr error
	ids := make([]ua.NodeID, 0, browseBatch)
browse:
	for depth := 1; depth <= sel.Depth && len(frontier) > 0; depth++ {
		var next []item
		for lo := 0; lo < len(frontier); lo += browseBatch {
			hi := min(lo+browseBatch, len(frontier))
			ids = ids[:0]
			for _, it := range frontier[lo:hi] {
				ids = append(ids, it.id)
			}
			res, err := c.BrowseChildren(ctx, ids...)
			if err != nil {
				return nil, fmt.Errorf("config: browse %s: %w", sel.Root, err)
			}
			var cands []browseCand
			for j := range res {
				if res[j].StatusCode.IsBad() {
					continue // a node that cannot be browsed has no children to offer
				}
				parent := frontier[lo+j]
				for _, ref := range res[j].References {
					if types == nil && len(found)+len(cands) >= sel.MaxNodes {
						break // enough: the rest would be cut off anyway
					}
					visited++
					if ref.ReferenceTypeID == ua.NewNumericNodeID(0, ua.ID_HasProperty) {
						continue
					}
					id, err := ref.NodeID.Resolve(ns)
					if err != nil || seen[id] {
						continue
					}
					if len(seen) >= limit {
						limitErr = fmt.Errorf("%w: %d nodes below %s (the limit for maxNodes %d)", ErrBrowseLimit, len(seen), sel.Root, sel.MaxNodes)
						break
					}
					seen[id] = true
					p := append(slices.Clip(parent.path), ref.BrowseName.Name)
					switch ref.NodeClass {
					case ua.NodeClassVariable:
						if ok, _ := path.Match(sel.Name, ref.BrowseName.Name); ok {
							name := ref.DisplayName.Text
							if name == "" {
								name = ref.BrowseName.Name
							}
							cands = append(cands, browseCand{id: id, path: p, name: name})
						}
						next = append(next, item{id, p}) // variables may have variables below them
					case ua.NodeClassObject, ua.NodeClassView:
						next = append(next, item{id, p})
					}
				}
			}
			if types != nil && len(cands) > 0 {
				if cands, err = filterDataTypes(ctx, c, cands, types); err != nil {
					return nil, fmt.Errorf("config: browse %s: %w", sel.Root, err)
				}
			}
			found = append(found, cands...)
			if len(found) >= sel.MaxNodes {
				found = found[:sel.MaxNodes]
				limitErr = nil // what was asked for is complete
			}
			if progress != nil {
				progress(len(found), visited)
			}
			if len(found) >= sel.MaxNodes || limitErr != nil {
				break browse
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		frontier = next
	}

	slices.SortStableFunc(found, func(a, b browseCand) int { return slices.Compare(a.path, b.path) })
	fields := make([]Field, len(found))
	names := make(map[string]bool, len(found))
	for i, f := range found {
		name := UniqueName(f.name, func(n string) bool { return names[n] })
		names[name] = true
		fields[i] = Field{Name: name, Node: nodeString(f.id, ns)}
	}
	return fields, limitErr
}

// browseLogInterval throttles ExpandWriterGroup's progress lines.
const browseLogInterval = 2 * time.Second

// ExpandWriterGroup returns a copy of wg with the browse selections of its
// writers replaced by the fields they select (ExpandBrowse), after the
// listed ones; a listed field wins over a found one of the same name. The
// copy has its defaults applied (ApplyDefaults): the fields found take the
// group's node defaults as listed ones do. wg is not modified. A selection
// that stopped early (ErrBrowseLimit) keeps what it found, with a warning;
// one that found nothing and failed is an error. Progress goes to log
// (slog.Default() when nil), at most every browseLogInterval per selection.
func ExpandWriterGroup(ctx context.Context, c *client.Client, wg *WriterGroup, log *slog.Logger) (*WriterGroup, error) {
	if log == nil {
		log = slog.Default()
	}
	out := *wg
	out.Writers = make([]DataSetWriter, len(wg.Writers))
	for i, w := range wg.Writers {
		w.Fields = slices.Clone(w.Fields)
		names := make(map[string]bool, len(w.Fields))
		for _, f := range w.Fields {
			names[f.Name] = true
		}
		for _, sel := range w.Browse {
			start := time.Now()
			last := start
			found, err := ExpandBrowse(ctx, c, sel, func(found, visited int) {
				if now := time.Now(); now.Sub(last) >= browseLogInterval {
					last = now
					log.Info("browsing", "group", wg.Name, "writer", w.Name, "root", sel.Root, "found", found, "visited", visited)
				}
			})
			if err != nil && len(found) == 0 {
				return nil, fmt.Errorf("writer %s/%s: browse %s: %w", wg.Name, w.Name, sel.Root, err)
			}
			if err != nil {
				log.Warn("browse stopped early", "group", wg.Name, "writer", w.Name, "root", sel.Root, "fields", len(found), "err", err)
			}
			added := 0
			for _, f := range found {
				if names[f.Name] {
					continue // a listed field of that name wins
				}
				names[f.Name] = true
				w.Fields = append(w.Fields, f)
				added++
			}
			log.Info("browse selected fields", "group", wg.Name, "writer", w.Name, "root", sel.Root, "fields", added, "took", time.Since(start).Round(time.Millisecond))
		}
		w.Browse = nil
		out.Writers[i] = w
	}
	out.ApplyDefaults()
	return &out, nil
}

// filterDataTypes keeps the candidates whose DataType attribute is one of
// types.
func filterDataTypes(ctx context.Context, c *client.Client, cands []browseCand, types map[ua.NodeID]bool) ([]browseCand, error) {
	req := &ua.ReadRequest{NodesToRead: make([]ua.ReadValueID, len(cands))}
	for i, cd := range cands {
		req.NodesToRead[i] = ua.ReadValueID{NodeID: cd.id, AttributeID: client.AttributeDataType}
	}
	resp, err := c.Read(ctx, req)
	if err != nil {
		return nil, err
	}
	out := cands[:0]
	for i, dv := range resp.Results {
		if dv.Status.IsBad() {
			continue
		}
		if id, ok := dv.Value.Value().(ua.NodeID); ok && types[id] {
			out = append(out, cands[i])
		}
	}
	return out, nil
}

// nodeString writes a node id with its namespace URI (ns=0 stays short).
func nodeString(id ua.NodeID, ns []string) string {
	if id.Namespace == 0 || int(id.Namespace) >= len(ns) {
		return id.String()
	}
	return ua.ExpandedNodeID{NodeID: id, NamespaceURI: ns[id.Namespace]}.String()
}
