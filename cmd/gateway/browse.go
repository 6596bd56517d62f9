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

// progressEvery is how many nodes pass between two progress lines on stderr
// off a terminal.
const progressEvery = 1000

// cmdBrowse walks the hierarchy below a node and prints it.
func cmdBrowse(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("browse", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf connFlags
	cf.register(fs)
	depth := fs.Int("depth", 1, fmt.Sprintf("levels to descend; 0 means all (every node is expanded once, %d nodes at most)", client.DefaultWalkMaxNodes))
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
	root, err := c.ParseNodeID(start)
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

// walk browses the tree below root, reporting progress on stderr once it is
// large.
func walk(ctx context.Context, c *client.Client, root ua.NodeID, maxDepth int, cf connFlags, stderr io.Writer) ([]client.TreeNode, []int, error) {
	prog := newProgress(stderr)
	reported := 0
	nodes, roots, err := c.Walk(ctx, root, client.WalkOptions{
		MaxDepth: maxDepth, CallTimeout: cf.timeout,
		BadNode: func(id ua.NodeID, sc ua.StatusCode) { fmt.Fprintf(stderr, "browse: %s: %v\n", id, sc) },
		Progress: func(found, depth, browsed, total int) {
			every := found/progressEvery > reported/progressEvery
			if every || prog.tty {
				prog.update(every, "browse: %d nodes (depth %d, %d of %d nodes at this depth browsed)", found, depth, browsed, total)
			}
			if every {
				reported = found
			}
		},
	})
	if err == nil && (reported > 0 || prog.shown) {
		prog.done("browse: done, %d nodes", len(nodes))
	}
	return nodes, roots, err
}

// each visits the tree depth first, in browse order.
func each(nodes []client.TreeNode, idxs []int, parent int, fn func(idx, parent int) error) error {
	for _, i := range idxs {
		if err := fn(i, parent); err != nil {
			return err
		}
		if err := each(nodes, nodes[i].Children, i, fn); err != nil {
			return err
		}
	}
	return nil
}

func printBrowseTable(w io.Writer, nodes []client.TreeNode, roots []int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BROWSE NAME\tNODE ID\tCLASS\tTYPE DEFINITION")
	err := each(nodes, roots, -1, func(i, _ int) error {
		n := &nodes[i]
		indent := make([]byte, 2*(n.Depth-1))
		for k := range indent {
			indent[k] = ' '
		}
		_, err := fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", indent, n.Ref.BrowseName, n.Ref.NodeID, n.Ref.NodeClass, typeName(n.Ref.TypeDefinition))
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
func printBrowseJSON(w io.Writer, nodes []client.TreeNode, roots []int, root ua.NodeID) error {
	if _, err := io.WriteString(w, "["); err != nil {
		return err
	}
	first := true
	err := each(nodes, roots, -1, func(i, parent int) error {
		n := &nodes[i]
		p := root.String()
		if parent >= 0 {
			p = nodes[parent].Ref.NodeID.String()
		}
		b, err := json.Marshal(browseJSON{
			NodeID:         n.Ref.NodeID.String(),
			BrowseName:     n.Ref.BrowseName.String(),
			DisplayName:    n.Ref.DisplayName.Text,
			NodeClass:      n.Ref.NodeClass.String(),
			TypeDefinition: typeName(n.Ref.TypeDefinition),
			ReferenceType:  typeName(ua.NewExpandedNodeID(n.Ref.ReferenceTypeID)),
			Parent:         p,
			Depth:          n.Depth,
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
