package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// ErrWalkLimit: Walk found more references than WalkOptions.MaxNodes; the
// nodes found until then are returned with it.
var ErrWalkLimit = errors.New("client: walk found too many nodes")

// DefaultWalkMaxNodes bounds the references Walk keeps unless
// WalkOptions.MaxNodes says otherwise: a server's address space may be
// larger than a client wants to hold, or endless.
const DefaultWalkMaxNodes = 1_000_000

// walkBatch is the number of nodes Walk browses per call (Browse splits each
// call further to fit the server's limits); Progress is called between
// batches.
const walkBatch = 200

// TreeNode is one reference Walk found.
type TreeNode struct {
	Ref      ua.ReferenceDescription
	Depth    int   // 1: a child of the root
	Children []int // the references found below it, indexes into Walk's nodes
}

// WalkOptions configure Walk.
type WalkOptions struct {
	// MaxDepth is how many levels below the root are browsed; 0: all.
	MaxDepth int
	// MaxNodes bounds the references kept (DefaultWalkMaxNodes when 0).
	MaxNodes int
	// CallTimeout bounds each Browse call (0: ctx only).
	CallTimeout time.Duration
	// Progress, when not nil, is called after each batch with the
	// references found, the depth browsed, and how many of the nodes at
	// that depth were browsed of how many.
	Progress func(found, depth, browsed, total int)
	// BadNode, when not nil, is called for a node the server could not
	// browse (a Bad status); the walk goes on without its children.
	BadNode func(id ua.NodeID, status ua.StatusCode)
}

// Walk browses the hierarchy below root breadth first, level by level,
// following the forward hierarchical references (BrowseChildren) in batches.
// It returns every reference found, in the order found, and the indexes of
// root's own. Each node is expanded once: a reference to a node seen before
// is listed without its children again, as is one to another server or to a
// namespace the server does not know.
func (c *Client) Walk(ctx context.Context, root ua.NodeID, opts WalkOptions) (nodes []TreeNode, roots []int, err error) {
	if opts.MaxNodes <= 0 {
		opts.MaxNodes = DefaultWalkMaxNodes
	}
	type pending struct {
		id  ua.NodeID
		idx int // of its TreeNode, -1 for root
	}
	seen := map[ua.NodeID]bool{root: true}
	frontier := []pending{{id: root, idx: -1}}
	ids := make([]ua.NodeID, 0, walkBatch)
	for depth := 1; len(frontier) > 0 && (opts.MaxDepth == 0 || depth <= opts.MaxDepth); depth++ {
		var next []pending
		for lo := 0; lo < len(frontier); lo += walkBatch {
			hi := min(lo+walkBatch, len(frontier))
			ids = ids[:0]
			for _, p := range frontier[lo:hi] {
				ids = append(ids, p.id)
			}
			bctx, cancel := ctx, context.CancelFunc(func() {})
			if opts.CallTimeout > 0 {
				bctx, cancel = context.WithTimeout(ctx, opts.CallTimeout)
			}
			res, err := c.BrowseChildren(bctx, ids...)
			cancel()
			if err != nil {
				return nil, nil, err
			}
			for j := range res {
				parent := frontier[lo+j].idx
				if sc := res[j].StatusCode; sc.IsBad() {
					if opts.BadNode != nil {
						opts.BadNode(ids[j], sc)
					}
					continue
				}
				for _, ref := range res[j].References {
					if len(nodes) >= opts.MaxNodes {
						return nodes, roots, fmt.Errorf("%w: more than %d below %s", ErrWalkLimit, opts.MaxNodes, root)
					}
					idx := len(nodes)
					nodes = append(nodes, TreeNode{Ref: ref, Depth: depth})
					if parent < 0 {
						roots = append(roots, idx)
					} else {
						nodes[parent].Children = append(nodes[parent].Children, idx)
					}
					id, err := ref.NodeID.Resolve(c.Namespaces())
					if err != nil || seen[id] {
						continue
					}
					seen[id] = true
					next = append(next, pending{id: id, idx: idx})
				}
			}
			if opts.Progress != nil {
				opts.Progress(len(nodes), depth, hi, len(frontier))
			}
		}
		frontier = next
	}
	return nodes, roots, nil
}
