package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

// Backend is what the engine needs of the gateway.
type Backend interface {
	// Session returns a connected client of the endpoint for commands (a
	// session of their own, so that a command never waits behind a sink's
	// full queue), waiting for the connection within ctx.
	Session(ctx context.Context, endpoint string) (*client.Client, error)
	// BrowsedField returns the node id of a field that a writer's browse
	// selection added (not in the configuration); false when there is no
	// such field.
	BrowsedField(group, writer, field string) (node string, ok bool)
}

// Options configure an Engine.
type Options struct {
	Backend Backend
	Logger  *slog.Logger     // default slog.Default()
	Now     func() time.Time // default time.Now; tests fake the clock of the limits
}

// Engine runs commands. See the package comment.
type Engine struct {
	opts      Options
	log       *slog.Logger
	queueSize int
	workers   int

	st atomic.Pointer[state] // the configuration in force (SetConfig)

	mu     sync.Mutex // guards lanes, closed, seen, limits
	lanes  map[string]*lane
	closed bool
	seen   *seen
	limits *limiter

	cmdLog *commandLog
	counts [len(transports)]counters

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// state is what one configuration decides.
type state struct {
	cfg   *config.Config
	cmd   *config.Commands
	rules *rules
}

// lane is an endpoint's bounded queue and its workers.
type lane struct {
	jobs chan *job
}

// job is a request on its way through a lane.
type job struct {
	caller   Caller
	req      *Request
	acc      *access
	ref      *reference
	recheck  bool // the rules allow it only, maybe, once its node is resolved
	start    time.Time
	deadline time.Time
	entry    *seenEntry
	done     func(*Response)
}

// reference is a request's target as the configuration names it, before
// the server's namespace array resolves it.
type reference struct {
	endpoint     string
	node         ua.ExpandedNodeID // write, read
	object, meth ua.ExpandedNodeID // call
	target       Target
	timeout      time.Duration
}

// New makes an engine for cfg (defaults applied and valid); its workers
// start with the first command of each endpoint.
func New(cfg *config.Config, opts Options) (*Engine, error) {
	if opts.Backend == nil {
		return nil, errors.New("command: no Backend")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	e := &Engine{opts: opts, log: opts.Logger, lanes: map[string]*lane{}, seen: newSeen(), limits: newLimiter(),
		queueSize: cfg.Commands.QueueSize, workers: cfg.Commands.Workers, cmdLog: newLog(max(cfg.Commands.LogSize, 1))}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.SetConfig(cfg)
	return e, nil
}

// SetConfig puts the rules and limits of cfg in force (a reload); the
// queues and workers keep the sizes they were made with.
func (e *Engine) SetConfig(cfg *config.Config) {
	e.st.Store(&state{cfg: cfg, cmd: &cfg.Commands, rules: compile(&cfg.Commands)})
}

// MaxPayload is the largest request the transports take, bytes.
func (e *Engine) MaxPayload() int { return e.st.Load().cmd.MaxPayload }

// Handle runs a request and returns its response: the one answer to it.
// It returns when the request is done, refused, or ctx ends (a timeout
// response; the request may still run to its end, bounded by the endpoint's
// request timeout).
func (e *Engine) Handle(ctx context.Context, caller Caller, req *Request) *Response {
	ch := make(chan *Response, 1)
	e.Submit(caller, req, func(r *Response) { ch <- r })
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return failure(req, refuse(KindTimeout, ua.StatusBadTimeout, "no answer in time: %v", ctx.Err()))
	}
}

// SubmitPayload decodes payload as a request and submits it; done gets its
// one response.
func (e *Engine) SubmitPayload(caller Caller, payload []byte, done func(*Response)) {
	req, resp := Decode(payload, e.MaxPayload())
	if resp != nil {
		e.finish(&job{caller: caller, req: &Request{RequestID: resp.RequestID}, start: e.opts.Now(), done: done}, resp)
		return
	}
	e.Submit(caller, req, done)
}

// Submit runs a request without waiting for it: done is called exactly once
// with its response, on this goroutine when the request is refused at once,
// else on a worker's. done must not block for long.
func (e *Engine) Submit(caller Caller, req *Request, done func(*Response)) {
	j := &job{caller: caller, req: req, start: e.opts.Now(), done: done}
	st := e.st.Load()
	if err := req.check(); err != nil {
		e.finish(j, failure(req, err))
		return
	}
	ref, acc, err := resolve(st.cfg, req, e.opts.Backend)
	if err != nil {
		e.finish(j, failure(req, err))
		return
	}
	j.ref, j.acc = ref, acc
	if err := st.rules.allow(caller, acc); err != nil {
		if !st.rules.byNode(caller, req.Op) {
			e.finish(j, failure(req, err))
			return
		}
		j.recheck = true
	}
	j.deadline = j.start.Add(ref.timeout)

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		e.finish(j, failure(req, refuse(KindUnavailable, ua.StatusBadShutdown, "the gateway is stopping")))
		return
	}
	ent, dup := e.seen.begin(caller.String()+"\x00"+req.RequestID, j.start, st.cmd.IdempotencyWindow.D(), st.cmd.IdempotencyEntries)
	switch {
	case ent == nil:
		e.mu.Unlock()
		e.finish(j, failure(req, refuse(KindBusy, ua.StatusBadTooManyOperations, "too many commands in flight to remember another request id; try again")))
		return
	case dup && ent.resp != nil:
		resp := duplicate(ent.resp)
		e.mu.Unlock()
		e.finish(j, resp)
		return
	case dup:
		if len(ent.waiters) >= maxWaiters {
			e.mu.Unlock()
			e.finish(j, failure(req, refuse(KindBusy, ua.StatusBadTooManyOperations, "request %q is being sent again and again while it runs", req.RequestID)))
			return
		}
		ent.waiters = append(ent.waiters, func(r *Response) { e.finish(j, duplicate(r)) })
		e.mu.Unlock()
		return
	}
	if !e.limits.take(caller.String(), st.rules.rate(caller), j.start) {
		e.seen.forget(ent)
		rate := st.rules.rate(caller)
		e.mu.Unlock()
		e.finish(j, failure(req, refuse(KindRateLimited, ua.StatusBadTooManyOperations, "caller %s is over its rate of %g per second (bursts of %d)", caller, rate.PerSecond, rate.Burst)))
		return
	}
	j.entry = ent
	l := e.laneLocked(ref.endpoint)
	select {
	case l.jobs <- j:
		e.mu.Unlock()
	default:
		e.seen.forget(ent)
		e.mu.Unlock()
		e.finish(j, failure(req, refuse(KindBusy, ua.StatusBadTooManyOperations, "the command queue of endpoint %s is full (%d commands waiting); try again", ref.endpoint, e.queueSize)))
	}
}

// duplicate is the response to a request id seen before.
func duplicate(r *Response) *Response {
	c := *r
	c.Duplicate = true
	return &c
}

// laneLocked returns the endpoint's lane, starting its workers (e.mu held).
func (e *Engine) laneLocked(endpoint string) *lane {
	if l := e.lanes[endpoint]; l != nil {
		return l
	}
	l := &lane{jobs: make(chan *job, e.queueSize)}
	e.lanes[endpoint] = l
	for range e.workers {
		e.wg.Add(1)
		go e.work(l)
	}
	return l
}

// work runs the lane's jobs until the engine closes; what is left then is
// answered "unavailable".
func (e *Engine) work(l *lane) {
	defer e.wg.Done()
	for {
		select {
		case j := <-l.jobs:
			e.complete(j, e.run(j))
		case <-e.ctx.Done():
			for {
				select {
				case j := <-l.jobs:
					e.complete(j, failure(j.req, refuse(KindUnavailable, ua.StatusBadShutdown, "the gateway is stopping")))
				default:
					return
				}
			}
		}
	}
}

// complete answers a job that ran and the duplicates that waited for it.
func (e *Engine) complete(j *job, resp *Response) {
	e.mu.Lock()
	var waiters []func(*Response)
	if ent := j.entry; ent != nil {
		ent.resp, ent.at, waiters, ent.waiters = resp, e.opts.Now(), ent.waiters, nil
	}
	e.mu.Unlock()
	e.finish(j, resp)
	for _, w := range waiters {
		w(resp)
	}
}

// finish counts, logs and answers.
func (e *Engine) finish(j *job, resp *Response) {
	if i := transportIndex(j.caller.Transport); i >= 0 {
		e.counts[i].requests.Add(1)
		e.counts[i].count(resp)
	}
	entry := LogEntry{At: j.start, Caller: j.caller.String(), Transport: j.caller.Transport, RequestID: resp.RequestID,
		Op: resp.Op, Target: resp.Target.String(), OldValue: resp.OldValue, Value: resp.Value, Status: resp.Status,
		Duplicate: resp.Duplicate, DurationMs: float64(e.opts.Now().Sub(j.start).Microseconds()) / 1000}
	if entry.Target == "" && j.ref != nil {
		entry.Target = j.ref.target.String()
	}
	if entry.Op == OpWrite && resp.Error == nil {
		entry.Value = resp.Value
	}
	if resp.Error != nil {
		entry.Error = resp.Error.Error()
	}
	e.cmdLog.add(entry)
	level := slog.LevelInfo
	if resp.Error != nil || !resp.Status.Good() {
		level = slog.LevelWarn
	}
	e.log.Log(context.Background(), level, "command", "caller", entry.Caller, "requestId", entry.RequestID, "op", entry.Op,
		"target", entry.Target, "old", string(entry.OldValue), "new", string(entry.Value), "status", resp.Status.Symbol,
		"error", entry.Error, "duplicate", entry.Duplicate)
	j.done(resp)
}

// Close answers what waits in the queues "unavailable", cancels what runs,
// and waits for the workers until ctx ends. Requests after Close are
// answered "unavailable".
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	done := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("command: workers still running: %w", ctx.Err())
	}
}

// Stats returns the counters of every transport.
func (e *Engine) Stats() []Stats {
	out := make([]Stats, len(transports))
	for i, t := range transports {
		out[i] = e.counts[i].snapshot(t)
	}
	return out
}

// Log returns the last n commands, newest first.
func (e *Engine) Log(n int) []LogEntry { return e.cmdLog.last(n) }

// Rules returns the authorisation in force (commands.rules) and the
// default rate.
func (e *Engine) Rules() ([]config.CommandRule, config.CommandRate) {
	st := e.st.Load()
	return st.cmd.Rules, st.cmd.Rate
}

// resolve finds a request's target in the configuration.
func resolve(cfg *config.Config, req *Request, b Backend) (*reference, *access, error) {
	ref := &reference{}
	acc := &access{op: req.Op}
	endpoint := req.Endpoint
	if req.Group != "" {
		wg := findGroup(cfg, req.Group)
		if wg == nil {
			return nil, nil, refuse(KindUnknownTarget, ua.StatusBadNodeIdUnknown, "no writer group is named %q", req.Group)
		}
		endpoint = wg.Endpoint
		if req.Op != OpCall {
			node, err := fieldNode(wg, req, b)
			if err != nil {
				return nil, nil, err
			}
			x, err := ua.ParseExpandedNodeID(node)
			if err != nil {
				return nil, nil, refuse(KindUnknownTarget, ua.StatusBadNodeIdInvalid, "field %s/%s/%s: node %q: %v", req.Group, req.Writer, req.Field, node, err)
			}
			ref.node = x
			acc.group, acc.writer, acc.field = req.Group, req.Writer, req.Field
			ref.target.Group, ref.target.Writer, ref.target.Field = req.Group, req.Writer, req.Field
		}
	}
	ep := findEndpoint(cfg, endpoint)
	if ep == nil {
		return nil, nil, refuse(KindUnknownTarget, ua.StatusBadNodeIdUnknown, "no endpoint is named %q", endpoint)
	}
	ref.endpoint, acc.endpoint, ref.target.Endpoint = ep.Name, ep.Name, ep.Name
	ref.timeout = ep.RequestTimeout.D()
	if ref.timeout <= 0 {
		ref.timeout = client.DefaultRequestTimeout
	}
	parse := func(what, s string) (ua.ExpandedNodeID, error) {
		x, err := ua.ParseExpandedNodeID(s)
		if err != nil {
			return x, refuse(KindInvalid, ua.StatusBadNodeIdInvalid, "%s %q is not a node id (ns=<index>;s=<name>, nsu=<uri>;i=<n>, i=<n>, …)", what, s)
		}
		return x, nil
	}
	var err error
	switch {
	case req.Op == OpCall:
		if ref.object, err = parse("object", req.Object); err != nil {
			return nil, nil, err
		}
		if ref.meth, err = parse("method", req.Method); err != nil {
			return nil, nil, err
		}
		acc.object, acc.method = []string{ref.object.String()}, []string{ref.meth.String()}
		acc.objID, acc.methID = ref.object.NodeID, ref.meth.NodeID
		ref.target.Object, ref.target.Method = ref.object.String(), ref.meth.String()
	case req.Group == "":
		if ref.node, err = parse("node", req.Node); err != nil {
			return nil, nil, err
		}
	}
	if req.Op != OpCall {
		acc.node, acc.nodeID = []string{ref.node.String()}, ref.node.NodeID
		ref.target.Node = ref.node.String()
	}
	return ref, acc, nil
}

func findGroup(cfg *config.Config, name string) *config.WriterGroup {
	for i := range cfg.WriterGroups {
		if cfg.WriterGroups[i].Name == name {
			return &cfg.WriterGroups[i]
		}
	}
	return nil
}

func findEndpoint(cfg *config.Config, name string) *config.Endpoint {
	for i := range cfg.Endpoints {
		if cfg.Endpoints[i].Name == name {
			return &cfg.Endpoints[i]
		}
	}
	return nil
}

// fieldNode is the node id of the request's field.
func fieldNode(wg *config.WriterGroup, req *Request, b Backend) (string, error) {
	for _, w := range wg.Writers {
		if w.Name != req.Writer {
			continue
		}
		for _, f := range w.Fields {
			if f.Name == req.Field {
				if f.Events != nil {
					return "", refuse(KindInvalid, ua.StatusBadNotWritable, "field %s/%s/%s is an event field", req.Group, req.Writer, req.Field)
				}
				return f.Node, nil
			}
		}
		if len(w.Browse) > 0 {
			if n, ok := b.BrowsedField(req.Group, req.Writer, req.Field); ok {
				return n, nil
			}
		}
		return "", refuse(KindUnknownTarget, ua.StatusBadNodeIdUnknown, "writer %s/%s has no field %q", req.Group, req.Writer, req.Field)
	}
	return "", refuse(KindUnknownTarget, ua.StatusBadNodeIdUnknown, "writer group %s has no writer %q", req.Group, req.Writer)
}

// diagnosticsMask asks the server for every diagnostic it has.
const diagnosticsMask = 0x3FF

// run executes a job against its endpoint.
func (e *Engine) run(j *job) *Response {
	req := j.req
	if !e.opts.Now().Before(j.deadline) {
		return failure(req, refuse(KindTimeout, ua.StatusBadTimeout, "waited in the queue past the endpoint's request timeout"))
	}
	ctx, cancel := context.WithDeadline(e.ctx, j.deadline)
	defer cancel()
	c, err := e.opts.Backend.Session(ctx, j.ref.endpoint)
	if err != nil {
		if ctx.Err() != nil && e.ctx.Err() == nil {
			return failure(req, refuse(KindTimeout, ua.StatusBadTimeout, "endpoint %s did not connect within its request timeout: %v", j.ref.endpoint, err))
		}
		return failure(req, refuse(KindUnavailable, ua.StatusBadServerNotConnected, "endpoint %s: %v", j.ref.endpoint, err))
	}
	ns := c.Namespaces()
	resolveID := func(what string, x ua.ExpandedNodeID) (ua.NodeID, error) {
		n, err := x.Resolve(ns)
		if err != nil {
			return n, refuse(KindUnknownTarget, ua.StatusBadNodeIdUnknown, "%s %s: %v", what, x, err)
		}
		return n, nil
	}
	resp := &Response{RequestID: req.RequestID, Op: req.Op}
	t := j.ref.target
	resp.Target = &t
	if req.Op == OpCall {
		obj, err := resolveID("object", j.ref.object)
		if err != nil {
			return failure(req, err)
		}
		meth, err := resolveID("method", j.ref.meth)
		if err != nil {
			return failure(req, err)
		}
		if j.recheck {
			j.acc.object = append(j.acc.object, nodeNames(obj, ns)...)
			j.acc.method = append(j.acc.method, nodeNames(meth, ns)...)
			if err := e.st.Load().rules.allow(j.caller, j.acc); err != nil {
				return failure(req, err)
			}
		}
		return e.call(ctx, c, ns, obj, meth, req, resp)
	}
	node, err := resolveID("node", j.ref.node)
	if err != nil {
		return failure(req, err)
	}
	if j.recheck {
		j.acc.node = append(j.acc.node, nodeNames(node, ns)...)
		if err := e.st.Load().rules.allow(j.caller, j.acc); err != nil {
			return failure(req, err)
		}
	}
	resp.Target.Node = node.String()
	if req.Op == OpRead {
		return e.read(ctx, c, ns, node, req, resp)
	}
	return e.write(ctx, c, ns, node, req, resp)
}

func (e *Engine) read(ctx context.Context, c *client.Client, ns []string, node ua.NodeID, req *Request, resp *Response) *Response {
	rr := &ua.ReadRequest{RequestHeader: ua.RequestHeader{ReturnDiagnostics: diagnosticsMask}, MaxAge: 0,
		TimestampsToReturn: ua.TimestampsToReturnBoth, NodesToRead: []ua.ReadValueID{{NodeID: node, AttributeID: client.AttributeValue}}}
	r, err := c.Read(ctx, rr)
	if err != nil {
		return failure(req, upstream("Read", err))
	}
	dv := &r.Results[0]
	resp.Status = Status(dv.Status)
	resp.Value = appendJSON(func(b []byte) ([]byte, error) {
		return jsonenc.AppendDataValue(b, dv, jsonenc.Options{NamespaceURIs: ns})
	})
	resp.Diagnostics = diagnostics(r.DiagnosticInfos, r.ResponseHeader.StringTable, ns)
	return resp
}

func (e *Engine) write(ctx context.Context, c *client.Client, ns []string, node ua.NodeID, req *Request, resp *Response) *Response {
	rr := &ua.ReadRequest{RequestHeader: ua.RequestHeader{ReturnDiagnostics: diagnosticsMask}, MaxAge: 0,
		TimestampsToReturn: ua.TimestampsToReturnBoth, NodesToRead: []ua.ReadValueID{
			{NodeID: node, AttributeID: client.AttributeValue},
			{NodeID: node, AttributeID: client.AttributeDataType},
			{NodeID: node, AttributeID: client.AttributeValueRank},
		}}
	r, err := c.Read(ctx, rr)
	if err != nil {
		return failure(req, upstream("Read", err))
	}
	old, dtv, rankv := &r.Results[0], &r.Results[1], &r.Results[2]
	if dtv.Status.IsBad() {
		resp.Status = Status(dtv.Status)
		resp.Error = &Error{Kind: KindUnknownTarget, Message: fmt.Sprintf("node %s: the server answers %s", node, dtv.Status.Name())}
		return resp
	}
	dt, ok := dtv.Value.Value().(ua.NodeID)
	if !ok {
		return failure(req, refuse(KindUpstream, ua.StatusBadTypeMismatch, "node %s: the server gives no DataType", node))
	}
	rank := int32(-1)
	if rankv.Status.IsGood() && rankv.Value.Type() == ua.TypeInt32 {
		rank = rankv.Value.Int32()
	}
	typ, err := builtinType(ctx, c, dt, &old.Value, req.Type)
	if err != nil {
		return failure(req, err)
	}
	if req.Type != "" {
		if want, ok := TypeByName(req.Type); !ok {
			return failure(req, refuse(KindInvalid, ua.StatusBadInvalidArgument, "type %q is not a built-in type name (Boolean, Int16, Double, String, …)", req.Type))
		} else if want != typ {
			return failure(req, mismatch("the request says %s; node %s is a %s", want, node, typ))
		}
	}
	array := isArrayRank(rank, req.Value)
	resp.Target.Type = typeText(typ, array)
	v, err := decodeValue(req.Value, typ, array, ns, "value")
	if err != nil {
		f := failure(req, err)
		f.Target = resp.Target
		return f
	}
	if old.Status.IsGood() || old.Status.IsUncertain() {
		resp.OldValue = appendJSON(func(b []byte) ([]byte, error) {
			return jsonenc.AppendVariant(b, &old.Value, jsonenc.Options{NamespaceURIs: ns})
		})
	}
	resp.Value = appendJSON(func(b []byte) ([]byte, error) {
		return jsonenc.AppendVariant(b, &v, jsonenc.Options{NamespaceURIs: ns})
	})
	wr, err := c.Write(ctx, &ua.WriteRequest{RequestHeader: ua.RequestHeader{ReturnDiagnostics: diagnosticsMask},
		NodesToWrite: []ua.WriteValue{{NodeID: node, AttributeID: client.AttributeValue, Value: ua.DataValue{Value: v}}}})
	if err != nil {
		f := failure(req, upstream("Write", err))
		f.Target, f.OldValue = resp.Target, resp.OldValue
		return f
	}
	resp.Status = Status(wr.Results[0])
	resp.Diagnostics = diagnostics(wr.DiagnosticInfos, wr.ResponseHeader.StringTable, ns)
	return resp
}

func (e *Engine) call(ctx context.Context, c *client.Client, ns []string, obj, meth ua.NodeID, req *Request, resp *Response) *Response {
	args, err := inputArguments(ctx, c, meth)
	if err != nil {
		return failure(req, err)
	}
	if len(req.Arguments) != len(args) {
		st := ua.StatusBadArgumentsMissing
		if len(req.Arguments) > len(args) {
			st = ua.StatusBadTooManyArguments
		}
		f := failure(req, refuse(KindInvalid, st, "method %s takes %d input arguments; the request has %d", meth, len(args), len(req.Arguments)))
		f.Target = resp.Target
		return f
	}
	in := make([]ua.Variant, len(args))
	var argResults []StatusCode
	var firstErr error
	for i := range args {
		a := &args[i]
		what := fmt.Sprintf("argument %d (%s)", i, a.name)
		t, err := builtinType(ctx, c, a.dt, &ua.Variant{}, "")
		if err == nil {
			in[i], err = decodeValue(req.Arguments[i], t, isArrayRank(a.rank, req.Arguments[i]), ns, what)
		}
		if err != nil {
			if argResults == nil {
				argResults = make([]StatusCode, len(args))
				for k := range argResults {
					argResults[k] = Status(ua.StatusGood)
				}
			}
			argResults[i] = Status(ua.StatusBadTypeMismatch)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	if firstErr != nil {
		f := failure(req, firstErr)
		f.Target, f.InputArgumentResults = resp.Target, argResults
		return f
	}
	cr, err := c.Call(ctx, &ua.CallRequest{RequestHeader: ua.RequestHeader{ReturnDiagnostics: diagnosticsMask},
		MethodsToCall: []ua.CallMethodRequest{{ObjectID: obj, MethodID: meth, InputArguments: in}}})
	if err != nil {
		f := failure(req, upstream("Call", err))
		f.Target = resp.Target
		return f
	}
	res := &cr.Results[0]
	resp.Status = Status(res.StatusCode)
	for _, sc := range res.InputArgumentResults {
		resp.InputArgumentResults = append(resp.InputArgumentResults, Status(sc))
	}
	for k := range res.OutputArguments {
		resp.OutputArguments = append(resp.OutputArguments, appendJSON(func(b []byte) ([]byte, error) {
			return jsonenc.AppendVariant(b, &res.OutputArguments[k], jsonenc.Options{NamespaceURIs: ns})
		}))
	}
	resp.Diagnostics = diagnostics(cr.DiagnosticInfos, cr.ResponseHeader.StringTable, ns)
	if len(res.InputArgumentDiagnosticInfos) > 0 {
		resp.Diagnostics = append(resp.Diagnostics, diagnostics(res.InputArgumentDiagnosticInfos, cr.ResponseHeader.StringTable, ns)...)
	}
	return resp
}

// appendJSON runs an append of OPC UA JSON; an empty or failed encoding
// gives {} (nothing a JSON document cannot hold).
func appendJSON(f func([]byte) ([]byte, error)) json.RawMessage {
	b, err := f(nil)
	if err != nil || len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

// diagnostics resolves the DiagnosticInfos of a response (empty ones left
// out).
func diagnostics(infos []ua.DiagnosticInfo, table, ns []string) []Diagnostic {
	var out []Diagnostic
	str := func(i int32) string {
		if i >= 0 && int(i) < len(table) {
			return table[i]
		}
		return ""
	}
	for k := range infos {
		d := &infos[k]
		if d.Mask == 0 {
			continue
		}
		x := Diagnostic{Index: k, AdditionalInfo: d.AdditionalInfo}
		if d.Mask&ua.DiagHasSymbolicID != 0 {
			x.SymbolicID = str(d.SymbolicID)
		}
		if d.Mask&ua.DiagHasNamespaceURI != 0 {
			x.NamespaceURI = str(d.NamespaceURI)
		}
		if d.Mask&ua.DiagHasLocalizedText != 0 {
			x.LocalizedText = str(d.LocalizedText)
		}
		if d.Mask&ua.DiagHasInnerStatusCode != 0 {
			s := Status(d.InnerStatusCode)
			x.InnerStatusCode = &s
		}
		out = append(out, x)
	}
	return out
}
