// Package cli holds the commands that talk to a running gateway's REST API:
// `gateway status` and `gateway nodes add|remove|list`. cmd/gateway wires
// them to flags; they print to an io.Writer and return errors that say what
// the gateway answered.
package cli

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/api"
)

// Client is a client of a gateway's API.
type Client struct {
	BaseURL string       // "http://127.0.0.1:8080"
	Token   string       // API key; "" for none
	HTTP    *http.Client // nil: a client with a 30 s timeout
}

// ProblemError is an error answer of the API.
type ProblemError struct {
	api.Problem
}

func (e *ProblemError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("gateway answered %d %s: %s", e.Status, e.Title, e.Detail)
	}
	return fmt.Sprintf("gateway answered %d %s", e.Status, e.Title)
}

// maxResponse bounds what is read of an answer.
const maxResponse = 64 << 20

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := strings.TrimRight(c.BaseURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("gateway URL %q: %w", c.BaseURL, err)
	}
	if body != nil || method != http.MethodGet {
		// The gateway takes a change only declared JSON (its defence
		// against pages of other sites).
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("gateway at %s: %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("gateway at %s: reading the answer: %w", c.BaseURL, err)
	}
	if resp.StatusCode >= 400 {
		var p api.Problem
		if json.Unmarshal(data, &p) == nil && p.Status != 0 {
			return &ProblemError{p}
		}
		return &ProblemError{api.Problem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("gateway at %s: unexpected answer to %s %s: %w", c.BaseURL, method, path, err)
		}
	}
	return nil
}

// list fetches every page of a list.
func list[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	var all []T
	cursor := ""
	for {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		p := path + sep + "limit=1000"
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		var page api.Page[T]
		if err := c.do(ctx, "GET", p, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all, nil
		}
		cursor = page.NextCursor
	}
}

func esc(s string) string { return url.PathEscape(s) }

// Status prints the gateway's overview: version, readiness, endpoints and
// sinks.
func Status(ctx context.Context, baseURL, token string, w io.Writer) error {
	return (&Client{BaseURL: baseURL, Token: token}).Status(ctx, w)
}

// Status prints the gateway's overview.
func (c *Client) Status(ctx context.Context, w io.Writer) error {
	var st api.Status
	if err := c.do(ctx, "GET", "/api/v1/status", nil, &st); err != nil {
		return err
	}
	ready := "ready"
	if !st.Ready {
		ready = "NOT READY"
	}
	fmt.Fprintf(w, "gateway %s, up %v, %s\n", st.Version, time.Duration(st.Uptime), ready)
	fmt.Fprintf(w, "%d writer groups, %d dataset writers, %d fields\n\n", st.WriterGroups, st.Writers, st.Fields)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tSTATE\tRECONNECTS\tSUBSCRIPTIONS\tURL\tERROR")
	for _, e := range st.Endpoints {
		msg := e.PermanentFailure
		if msg == "" {
			msg = e.LastError
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", e.Name, e.State, e.Reconnects, e.Subscriptions, e.URL, oneLine(msg))
	}
	if len(st.Sinks) > 0 {
		fmt.Fprintln(tw, "\t\t\t\t\t")
		fmt.Fprintln(tw, "SINK\tCONNECTED\tQUEUED\tSENT\tDROPPED\tERROR")
		for _, k := range st.Sinks {
			fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%d\t%s\n", k.Name, k.Connected, k.Queued, k.Sent, k.Dropped, oneLine(k.LastError))
		}
	}
	if so := st.ScaleOut; so != nil {
		fmt.Fprintln(tw, "\t\t\t\t\t")
		fmt.Fprintf(tw, "WRITER GROUP\tLEASE HOLDER (this replica: %s)\t\t\t\t\n", so.ReplicaID)
		for _, g := range so.Groups {
			holder := g.Holder
			switch {
			case g.Local:
				holder += " (here)"
			case holder == "":
				holder = "nobody"
			}
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\n", g.Group, holder)
		}
	}
	return tw.Flush()
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// NodesList prints the fields (nodes) of a dataset writer; with writer ""
// those of every writer of the group, with group "" of every group.
func NodesList(ctx context.Context, baseURL, token, group, writer string, w io.Writer) error {
	return (&Client{BaseURL: baseURL, Token: token}).NodesList(ctx, group, writer, w)
}

// NodesList prints fields; see the function NodesList.
func (c *Client) NodesList(ctx context.Context, group, writer string, w io.Writer) error {
	var groups []api.WriterGroup
	if group == "" {
		if writer != "" {
			return errors.New("a writer is named within a group: give the group too")
		}
		var err error
		if groups, err = list[api.WriterGroup](ctx, c, "/api/v1/writer-groups"); err != nil {
			return err
		}
	} else {
		var g api.WriterGroup
		if err := c.do(ctx, "GET", "/api/v1/writer-groups/"+esc(group), nil, &g); err != nil {
			return err
		}
		groups = []api.WriterGroup{g}
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tWRITER\tFIELD\tNODE")
	found := writer == ""
	for _, g := range groups {
		for _, d := range g.Writers {
			if writer != "" && d.Name != writer {
				continue
			}
			found = true
			for _, f := range d.Fields {
				name := f.Name
				if name == "" {
					name = f.Node
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Name, d.Name, name, f.Node)
			}
		}
	}
	if !found {
		return fmt.Errorf("writer group %q has no dataset writer %q", group, writer)
	}
	return tw.Flush()
}

// NodesAdd adds nodes (as fields named by their node id, or "name=node") to
// a dataset writer, all or none; the writer is created when the group has
// none of that name.
func NodesAdd(ctx context.Context, baseURL, token, group, writer string, nodes []string, w io.Writer) error {
	return (&Client{BaseURL: baseURL, Token: token}).NodesAdd(ctx, group, writer, nodes, w)
}

// NodesAdd adds fields; see the function NodesAdd.
func (c *Client) NodesAdd(ctx context.Context, group, writer string, nodes []string, w io.Writer) error {
	if group == "" || writer == "" || len(nodes) == 0 {
		return errors.New("nodes add needs a group, a writer and at least one node")
	}
	fields := make([]api.Field, len(nodes))
	for i, n := range nodes {
		fields[i] = parseFieldArg(n)
	}
	path := "/api/v1/writer-groups/" + esc(group) + "/writers/" + esc(writer)
	err := c.do(ctx, "POST", path+"/fields", api.FieldsRequest{Fields: fields}, nil)
	var pe *ProblemError
	if errors.As(err, &pe) && pe.Status == http.StatusNotFound && pe.Field == "writer" {
		err = c.do(ctx, "POST", "/api/v1/writer-groups/"+esc(group)+"/writers", api.DataSetWriter{Name: writer, Fields: fields}, nil)
		if err == nil {
			fmt.Fprintf(w, "created dataset writer %s/%s\n", group, writer)
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "added %d node(s) to %s/%s\n", len(fields), group, writer)
	// The gateway answers once the server has answered for the monitored
	// items: a node it refused (unknown, no access …) reads its Bad status.
	refused, err := c.refusedFields(ctx, group, writer, fields)
	if err != nil {
		return fmt.Errorf("added, but their states could not be read: %w", err)
	}
	for _, r := range refused {
		fmt.Fprintf(w, "refused by the server: %s\n", r)
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: the server refused %d of the %d node(s); they stay configured and are retried (nodes remove takes them out)",
			ErrRefused, len(refused), len(fields))
	}
	return nil
}

// ErrRefused: the gateway took the nodes, the OPC UA server refused some.
var ErrRefused = errors.New("nodes refused")

// refusedFields lists the fields among added whose last value is a Bad
// status other than BadWaitingForInitialData: "field (node): Symbol".
func (c *Client) refusedFields(ctx context.Context, group, writer string, added []api.Field) ([]string, error) {
	vals, err := list[api.LastValue](ctx, c, "/api/v1/writer-groups/"+esc(group)+"/writers/"+esc(writer)+"/values?encoding=verbose")
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, f := range added {
		want[cmp.Or(f.Name, f.Node)] = true
	}
	var out []string
	for _, v := range vals {
		if !want[v.Field] {
			continue
		}
		var dv struct {
			Status struct { // verbose: {"Code":n,"Symbol":s}; absent when Good
				Code   uint32 `json:"Code"`
				Symbol string `json:"Symbol"`
			} `json:"Status"`
		}
		if json.Unmarshal(v.Value, &dv) != nil {
			continue
		}
		const bad, waiting = 0x80000000, 0x80320000
		if st := dv.Status; st.Code&0xC0000000 == bad && st.Code&0xFFFF0000 != waiting {
			out = append(out, fmt.Sprintf("%s (%s): %s", v.Field, v.Node, cmp.Or(st.Symbol, fmt.Sprintf("0x%08X", st.Code))))
		}
	}
	return out, nil
}

// parseFieldArg reads "node" or "name=node". A node id holds '=' itself
// ("ns=1;s=A", "i=85"), so a name is recognised only before a '=' that is
// followed by a node id form.
func parseFieldArg(s string) api.Field {
	if i := strings.IndexByte(s, '='); i > 0 {
		name, rest := s[:i], s[i+1:]
		if !strings.ContainsAny(name, ";") && name != "ns" && name != "nsu" && name != "i" && name != "s" && name != "g" &&
			name != "b" && name != "svr" && name != "svu" && strings.Contains(rest, "=") {
			return api.Field{Name: name, Node: rest}
		}
	}
	return api.Field{Node: s}
}

// NodesRemove removes fields (named by field name or node id) from a
// dataset writer, all or none: when one is not there, nothing is removed.
func NodesRemove(ctx context.Context, baseURL, token, group, writer string, nodes []string, w io.Writer) error {
	return (&Client{BaseURL: baseURL, Token: token}).NodesRemove(ctx, group, writer, nodes, w)
}

// NodesRemove removes fields; see the function NodesRemove.
func (c *Client) NodesRemove(ctx context.Context, group, writer string, nodes []string, w io.Writer) error {
	if group == "" || writer == "" || len(nodes) == 0 {
		return errors.New("nodes remove needs a group, a writer and at least one node")
	}
	path := "/api/v1/writer-groups/" + esc(group) + "/writers/" + esc(writer)
	if len(nodes) == 1 {
		if err := c.do(ctx, "DELETE", path+"/fields/"+esc(nodes[0]), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(w, "removed 1 node from %s/%s\n", group, writer)
		return nil
	}
	// Several: one change of the writer, so that they go together.
	var d api.DataSetWriter
	if err := c.do(ctx, "GET", path, nil, &d); err != nil {
		return err
	}
	drop := make([]bool, len(d.Fields))
	for _, n := range nodes {
		at := -1
		for i, f := range d.Fields {
			if !drop[i] && (f.Name == n || (f.Name == "" && f.Node == n)) {
				at = i
				break
			}
		}
		if at < 0 {
			for i, f := range d.Fields {
				if !drop[i] && f.Node == n {
					at = i
					break
				}
			}
		}
		if at < 0 {
			return fmt.Errorf("dataset writer %s/%s has no field %q; nothing was removed", group, writer, n)
		}
		drop[at] = true
	}
	kept := d.Fields[:0]
	for i, f := range d.Fields {
		if !drop[i] {
			kept = append(kept, f)
		}
	}
	d.Fields = kept
	if err := c.do(ctx, "PUT", path, d, nil); err != nil {
		return err
	}
	fmt.Fprintf(w, "removed %d nodes from %s/%s\n", len(nodes), group, writer)
	return nil
}
