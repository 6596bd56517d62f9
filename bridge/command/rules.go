package command

import (
	"fmt"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/uastack/ua"
)

// The authorisation: explicit and default-deny. A request is allowed when a
// rule whose callers match the caller lists its target for its operation.
// Nothing else is allowed. The rules are compiled from the configuration
// once per change (SetConfig) and read without a lock.

// rules are the compiled commands.rules.
type rules struct {
	list []rule
	def  config.CommandRate
}

type rule struct {
	name    string
	callers []callerPattern
	write   []targetPattern
	read    []targetPattern
	call    []config.CommandMethod
	rate    *config.CommandRate
}

type callerPattern struct{ transport, sink, id string }

type targetPattern = config.CommandTarget

func compile(c *config.Commands) *rules {
	rs := &rules{def: c.Rate}
	for _, r := range c.Rules {
		cr := rule{name: r.Name, write: r.Write, read: r.Read, call: r.Call, rate: r.Rate}
		for _, p := range r.Callers {
			if t, s, id, ok := config.ParseCallerPattern(p); ok {
				cr.callers = append(cr.callers, callerPattern{t, s, id})
			}
		}
		rs.list = append(rs.list, cr)
	}
	return rs
}

func (p callerPattern) match(c Caller) bool {
	return (p.transport == "*" || p.transport == c.Transport) &&
		(p.sink == "" || glob(p.sink, c.Sink)) && glob(p.id, c.ID)
}

func (r *rule) matches(c Caller) bool {
	for _, p := range r.callers {
		if p.match(c) {
			return true
		}
	}
	return false
}

// rate is the rate limit of a caller: the first matching rule's with a
// rate, else the default.
func (rs *rules) rate(c Caller) config.CommandRate {
	for i := range rs.list {
		if r := &rs.list[i]; r.rate != nil && r.matches(c) {
			return *r.rate
		}
	}
	return rs.def
}

// nodeNames are the forms a node is matched in: its ns= form, and its nsu=
// form when the namespace is known.
func nodeNames(n ua.NodeID, ns []string) []string {
	out := []string{n.String()}
	if n.Namespace > 0 && int(n.Namespace) < len(ns) {
		out = append(out, ua.ExpandedNodeID{NodeID: n, NamespaceURI: ns[n.Namespace]}.String())
	}
	return out
}

func globAny(pattern string, names []string) bool {
	for _, n := range names {
		if glob(pattern, n) {
			return true
		}
	}
	return false
}

// access is what a request asks for, resolved.
type access struct {
	op                    Op
	endpoint              string
	group, writer, field  string // "" for a node
	node                  []string
	object, method        []string
	nodeID, objID, methID ua.NodeID
}

// allow reports whether some rule lets caller do a; otherwise the refusal
// says why.
func (rs *rules) allow(c Caller, a *access) error {
	matched := false
	for i := range rs.list {
		r := &rs.list[i]
		if !r.matches(c) {
			continue
		}
		matched = true
		switch a.op {
		case OpWrite:
			if allowTarget(r.write, a) {
				return nil
			}
		case OpRead:
			if allowTarget(r.read, a) {
				return nil
			}
		case OpCall:
			for _, m := range r.call {
				if glob(m.Endpoint, a.endpoint) && globAny(m.Object, a.object) && globAny(m.Method, a.method) {
					return nil
				}
			}
		}
	}
	what := a.describe()
	if !matched {
		return refuse(KindDenied, ua.StatusBadUserAccessDenied, "no command rule is for caller %s (commands.rules[].callers)", c)
	}
	return refuse(KindDenied, ua.StatusBadUserAccessDenied, "no command rule lets %s %s %s (commands.rules[].%s)", c, a.op, what, a.op)
}

func allowTarget(ts []targetPattern, a *access) bool {
	for _, t := range ts {
		if t.Group != "" {
			if a.group != "" && glob(t.Group, a.group) && glob(t.Writer, a.writer) && glob(t.Field, a.field) {
				return true
			}
			continue
		}
		if glob(t.Endpoint, a.endpoint) && globAny(t.Node, a.node) {
			return true
		}
	}
	return false
}

func (a *access) describe() string {
	switch {
	case a.op == OpCall:
		return fmt.Sprintf("method %s of %s on endpoint %s", a.methID, a.objID, a.endpoint)
	case a.group != "":
		return fmt.Sprintf("field %s/%s/%s", a.group, a.writer, a.field)
	}
	return fmt.Sprintf("node %s of endpoint %s", a.nodeID, a.endpoint)
}

// glob matches s against pattern, where '*' matches any run of characters
// (also none) and everything else itself.
func glob(pattern, s string) bool {
	// The classic iterative matcher: on a mismatch after a '*', let that
	// '*' take one more character and try again.
	var p, i, star, mark = 0, 0, -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// byNode reports whether a rule that matches c grants op on nodes (not
// fields): then the namespace array may turn a refusal on the text of a
// node id into an allowance (an nsu= pattern, an ns= request), and the
// check is made again once the node is resolved.
func (rs *rules) byNode(c Caller, op Op) bool {
	for i := range rs.list {
		r := &rs.list[i]
		if !r.matches(c) {
			continue
		}
		switch op {
		case OpCall:
			if len(r.call) > 0 {
				return true
			}
		case OpWrite, OpRead:
			ts := r.write
			if op == OpRead {
				ts = r.read
			}
			for _, t := range ts {
				if t.Group == "" {
					return true
				}
			}
		}
	}
	return false
}
