package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

const (
	// browseBatch is the number of nodes browsed per call while walking the tree
	// (the client splits each call further to fit the server's limits); progress
	// is reported between batches.
	browseBatch = 200
	// progressEvery is how many nodes pass between two progress lines on stderr.
	progressEvery = 1000
)

// browseNode is one reference found while walking the tree.
type browseNode struct {
	ref      ua.ReferenceDescription
	depth    int
	children []int // indexes into the node list
}

// cmdBrowse walks the hierarchy below a node and prints it.
func cmdBrowse(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("browse", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf connFlags
	cf.register(fs)
	depth := fs.Int("depth", 1, "levels to descend; 0 means all (every node is expanded once)")
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: gateway browse [flags] <endpoint> [node]\n\nLists the nodes below node (default i=85, the Objects folder) along hierarchical references.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return errFlagParse(err)
	}
	if len(pos) < 1 || len(pos) > 2 {
		fs.Usage()
		return fmt.Errorf("%w: browse needs an endpoint and at most one node", errUsage)
	}
	if *depth < 0 {
		return fmt.Errorf("%w: -depth %d is negative", errUsage, *depth)
	}
	start := "i=85"
	if len(pos) == 2 {
		start = pos[1]
	}
	if _, err := ua.ParseExpandedNodeID(start); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	c, err := cf.dial(ctx, pos[0], stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	root, err := parseNode(start, c)
	if err != nil {
		return err
	}

	nodes, roots, err := walk(ctx, c, root, *depth, cf, stderr)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	if *asJSON {
		err = printBrowseJSON(w, nodes, roots, root)
	} else {
		err = printBrowseTable(w, nodes, roots)
	}
	if err != nil {
		return err
	}
	return w.Flush()
}

type frontierItem struct {
	id  ua.NodeID
	idx int // index of its browseNode, -1 for the start node
}

// walk browses breadth first, level by level, in batches, and reports progress
// on stderr once the tree is large.
func walk(ctx context.Context, c *client.Client, root ua.NodeID, maxDepth int, cf connFlags, stderr io.Writer) ([]browseNode, []int, error) {
	var nodes []browseNode
	var roots []int
	seen := map[ua.NodeID]bool{root: true}
	frontier := []frontierItem{{id: root, idx: -1}}
	reported := 0
	prog := newProgress(stderr)
	for d := 1; len(frontier) > 0 && (maxDepth == 0 || d <= maxDepth); d++ {
		var next []frontierItem
		for lo := 0; lo < len(frontier); lo += browseBatch {
			hi := min(lo+browseBatch, len(frontier))
			ids := make([]ua.NodeID, 0, hi-lo)
			for _, f := range frontier[lo:hi] {
				ids = append(ids, f.id)
			}
			bctx, cancel := context.WithTimeout(ctx, cf.timeout)
			res, err := c.BrowseChildren(bctx, ids...)
			cancel()
			if err != nil {
				return nil, nil, err
			}
			for j := range res {
				parent := frontier[lo+j].idx
				if sc := res[j].StatusCode; sc.IsBad() {
					fmt.Fprintf(stderr, "browse: %s: %v\n", ids[j], sc)
					continue
				}
				for _, ref := range res[j].References {
					idx := len(nodes)
					nodes = append(nodes, browseNode{ref: ref, depth: d})
					if parent < 0 {
						roots = append(roots, idx)
					} else {
						nodes[parent].children = append(nodes[parent].children, idx)
					}
					id, err := ref.NodeID.Resolve(c.Namespaces())
					if err != nil || seen[id] {
						continue // on another server, unknown namespace, or expanded already
					}
					seen[id] = true
					next = append(next, frontierItem{id: id, idx: idx})
				}
			}
			every := len(nodes)/progressEvery > reported/progressEvery
			if every || prog.tty {
				prog.update(every, "browse: %d nodes (depth %d, %d of %d nodes at this depth browsed)", len(nodes), d, hi, len(frontier))
			}
			if every {
				reported = len(nodes)
			}
		}
		frontier = next
	}
	if reported > 0 || prog.shown {
		prog.done("browse: done, %d nodes", len(nodes))
	}
	return nodes, roots, nil
}

// each visits the tree depth first, in browse order.
func each(nodes []browseNode, idxs []int, parent int, fn func(idx, parent int) error) error {
	for _, i := range idxs {
		if err := fn(i, parent); err != nil {
			return err
		}
		if err := each(nodes, nodes[i].children, i, fn); err != nil {
			return err
		}
	}
	return nil
}

func printBrowseTable(w io.Writer, nodes []browseNode, roots []int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BROWSE NAME\tNODE ID\tCLASS\tTYPE DEFINITION")
	err := each(nodes, roots, -1, func(i, _ int) error {
		n := &nodes[i]
		indent := make([]byte, 2*(n.depth-1))
		for k := range indent {
			indent[k] = ' '
		}
		_, err := fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", indent, n.ref.BrowseName, n.ref.NodeID, n.ref.NodeClass, typeName(n.ref.TypeDefinition))
		return err
	})
	if err != nil {
		return err
	}
	return tw.Flush()
}

type browseJSON struct {
	NodeID         string `json:"nodeId"`
	BrowseName     string `json:"browseName"`
	DisplayName    string `json:"displayName"`
	NodeClass      string `json:"nodeClass"`
	TypeDefinition string `json:"typeDefinition,omitempty"`
	ReferenceType  string `json:"referenceType"`
	Parent         string `json:"parent"`
	Depth          int    `json:"depth"`
}

// printBrowseJSON writes a JSON array, one element at a time, so a large tree is
// not held twice.
func printBrowseJSON(w io.Writer, nodes []browseNode, roots []int, root ua.NodeID) error {
	if _, err := io.WriteString(w, "["); err != nil {
		return err
	}
	first := true
	err := each(nodes, roots, -1, func(i, parent int) error {
		n := &nodes[i]
		p := root.String()
		if parent >= 0 {
			p = nodes[parent].ref.NodeID.String()
		}
		b, err := json.Marshal(browseJSON{
			NodeID:         n.ref.NodeID.String(),
			BrowseName:     n.ref.BrowseName.String(),
			DisplayName:    n.ref.DisplayName.Text,
			NodeClass:      n.ref.NodeClass.String(),
			TypeDefinition: typeName(n.ref.TypeDefinition),
			ReferenceType:  typeName(ua.NewExpandedNodeID(n.ref.ReferenceTypeID)),
			Parent:         p,
			Depth:          n.depth,
		})
		if err != nil {
			return err
		}
		sep := ",\n  "
		if first {
			sep, first = "\n  ", false
		}
		if _, err := io.WriteString(w, sep); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, "\n]\n")
	return err
}

// typeName names a standard type ("FolderType") and prints any other node id.
func typeName(x ua.ExpandedNodeID) string {
	if x.IsNull() {
		return ""
	}
	if x.ServerIndex == 0 && x.NamespaceURI == "" && x.Namespace == 0 && x.Type == ua.IDNumeric {
		if name := ua.NodeIDName(x.Numeric); name != "" {
			return name
		}
	}
	return x.String()
}
