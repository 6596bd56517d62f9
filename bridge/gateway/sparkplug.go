package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/uagate/gateway/bridge/command"
	"github.com/uagate/gateway/bridge/sink/sparkplug"
	"github.com/uagate/gateway/jsonenc"
)

// sparkplugCommander carries the writes of a Sparkplug node's DCMDs
// through the command engine: each metric is a write request of its
// field, from the caller sparkplug/<sink>:<primary host id> ("host" without
// one), so that the commands' rules decide, log and count it as for every
// transport. Until the engine is there (Start makes it after the sinks)
// every write is refused.
type sparkplugCommander struct {
	e    atomic.Pointer[command.Engine]
	reqs atomic.Uint64 // request ids: a DCMD has none, and none is a repeat
}

// WriteMetrics implements sparkplug.Commander.
func (c *sparkplugCommander) WriteMetrics(ctx context.Context, req sparkplug.WriteRequest) []error {
	out := make([]error, len(req.Writes))
	e := c.e.Load()
	host := req.Host
	if host == "" {
		host = "host"
	}
	caller := command.Caller{Transport: command.TransportSparkplug, Sink: req.Sink, ID: host}
	for i, w := range req.Writes {
		if e == nil {
			out[i] = fmt.Errorf("%w: the command engine is not running", sparkplug.ErrDenied)
			continue
		}
		value, err := jsonenc.AppendVariant(nil, &w.Value, jsonenc.Options{})
		if err != nil {
			out[i] = err
			continue
		}
		r := e.Handle(ctx, caller, &command.Request{
			RequestID: "sparkplug-" + req.Sink + "-" + strconv.FormatUint(c.reqs.Add(1), 10),
			Op:        command.OpWrite, Group: w.Group, Writer: w.Writer, Field: w.Field, Value: value,
		})
		switch {
		case r.Error != nil && r.Error.Kind == command.KindDenied:
			out[i] = fmt.Errorf("%w: %s", sparkplug.ErrDenied, r.Error.Message)
		case r.Error != nil:
			out[i] = r.Error
		case !r.Status.Good():
			out[i] = errors.New("the server refused the write: " + r.Status.Symbol)
		}
	}
	return out
}
