package command

import (
	"errors"
	"time"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/uastack/ua"
)

// For a transport that runs the OPC UA operation itself (the REST API's
// Write and Call, whose requests carry several operations, attributes and
// Variants of their own), the engine authorises, rate-limits and records:
// the same rules, buckets, log and counters as the commands it runs.

// Authorize reports whether caller may do op (OpWrite, OpRead, OpCall) on
// node of endpoint; for OpCall node is the object and method the method.
// The node ids are resolved: ns is the server's namespace array. The error
// is a refusal (KindOf tells its kind).
func (e *Engine) Authorize(caller Caller, op Op, endpoint string, node, method ua.NodeID, ns []string) error {
	acc := &access{op: op, endpoint: endpoint}
	if op == OpCall {
		acc.object, acc.method, acc.objID, acc.methID = nodeNames(node, ns), nodeNames(method, ns), node, method
	} else {
		acc.node, acc.nodeID = nodeNames(node, ns), node
	}
	return e.st.Load().rules.allow(caller, acc)
}

// Allow takes a token of caller's rate bucket; the error is a refusal of
// kind KindRateLimited when there is none.
func (e *Engine) Allow(caller Caller) error {
	st := e.st.Load()
	rate := st.rules.rate(caller)
	e.mu.Lock()
	ok := e.limits.take(caller.String(), rate, e.opts.Now())
	e.mu.Unlock()
	if !ok {
		return refuse(KindRateLimited, ua.StatusBadTooManyOperations, "caller %s is over its rate of %g per second (bursts of %d)", caller, rate.PerSecond, rate.Burst)
	}
	return nil
}

// KindOf returns the kind of a refusal (Authorize, Allow), "" for another
// error.
func KindOf(err error) string {
	var r *refusal
	if errors.As(err, &r) {
		return r.err.Kind
	}
	return ""
}

// Record puts an operation the caller's transport ran into the command log
// and the counters: its target ("<endpoint> <node>"), the value written
// (and the one before, when known), its status and, when it was refused or
// failed, why.
func (e *Engine) Record(caller Caller, op Op, target Target, old, value json.RawMessage, status ua.StatusCode, err error, start time.Time) {
	resp := &Response{Op: op, Target: &target, OldValue: old, Value: value, Status: Status(status)}
	if err != nil {
		f := failure(nil, err)
		resp.Error = f.Error
		if status == ua.StatusGood {
			resp.Status = f.Status
		}
	}
	e.finish(&job{caller: caller, req: &Request{Op: op}, start: start, done: func(*Response) {}}, resp)
}
