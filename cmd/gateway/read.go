package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/ua"
)

// cmdRead reads the Value attribute of nodes and prints them.
func cmdRead(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("read", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf connFlags
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of a table (each value in OPC UA JSON, Part 6 compact)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: gateway read [flags] <endpoint> <node>...\n\nReads the Value attribute of the nodes (\"ns=1;s=Demo.Counter\", \"i=2258\", \"nsu=<uri>;s=…\").\n\nFlags:\n")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return errFlagParse(err)
	}
	if len(pos) < 2 {
		fs.Usage()
		return fmt.Errorf("%w: read needs an endpoint and at least one node", errUsage)
	}
	for _, s := range pos[1:] {
		if _, err := ua.ParseExpandedNodeID(s); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	c, err := cf.dial(ctx, pos[0], stderr)
	if err != nil {
		return err
	}
	defer c.Close()

	ids := make([]ua.NodeID, 0, len(pos)-1)
	for _, s := range pos[1:] {
		id, err := c.ParseNodeID(s)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	rctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	vals, err := c.ReadValues(rctx, ids...)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make([]readJSON, len(vals))
		for i := range vals {
			if out[i], err = newReadJSON(ids[i], &vals[i]); err != nil {
				return err
			}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE ID\tVALUE\tTYPE\tSTATUS\tSOURCE TIMESTAMP")
	for i := range vals {
		dv := &vals[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ids[i], dv.Value.String(), variantType(&dv.Value), dv.Status, timestamp(dv.SourceTimestamp))
	}
	return tw.Flush()
}

type readJSON struct {
	NodeID string `json:"nodeId"`
	// Value is the value alone in OPC UA JSON (Part 6, compact, as the
	// gateway's messages and REST API write it); Type names its type.
	Value           json.RawMessage `json:"value"`
	Type            string          `json:"type"`
	Status          string          `json:"status"`
	StatusCode      uint32          `json:"statusCode"`
	SourceTimestamp string          `json:"sourceTimestamp,omitempty"`
	ServerTimestamp string          `json:"serverTimestamp,omitempty"`
}

func newReadJSON(id ua.NodeID, dv *ua.DataValue) (readJSON, error) {
	v, err := jsonenc.Append(nil, jsonenc.Options{Mode: jsonenc.Compact}, func(e *jsonenc.Encoder) { e.WriteVariantBody(&dv.Value) })
	if err != nil {
		return readJSON{}, fmt.Errorf("the value of %s: %w", id, err)
	}
	return readJSON{
		NodeID:          id.String(),
		Value:           v,
		Type:            variantType(&dv.Value),
		Status:          dv.Status.String(),
		StatusCode:      uint32(dv.Status),
		SourceTimestamp: timestamp(dv.SourceTimestamp),
		ServerTimestamp: timestamp(dv.ServerTimestamp),
	}, nil
}

func variantType(v *ua.Variant) string {
	if v.IsNull() {
		return "Null"
	}
	if v.IsArray() {
		return v.Type().String() + "[]"
	}
	return v.Type().String()
}

func timestamp(t ua.DateTime) string {
	if t.IsNull() {
		return ""
	}
	return t.Time().UTC().Format(time.RFC3339Nano)
}
