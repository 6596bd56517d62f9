package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// eventSource is the list of event items of a notifier node.
type eventSource struct {
	mu    sync.Mutex
	items []*monitoredItem
}

// simEvent is an event of the simulated alarm source, shaped as an
// AlarmConditionType event.
type simEvent struct {
	id        []byte
	typ       *node
	source    *node
	condition ua.NodeID
	time      ua.DateTime
	message   string
	severity  uint16
	lastSev   uint16
	active    bool
	acked     bool
	retain    bool
}

// field returns the value of a select clause's field; null when the event has
// no such field.
func (e *simEvent) field(path []ua.QualifiedName, attr uint32) ua.Variant {
	if attr == attrNodeID && len(path) == 0 {
		return ua.MustVariant(e.condition) // ConditionId
	}
	if attr != attrValue {
		return ua.Variant{}
	}
	var name strings.Builder
	for i, q := range path {
		if i > 0 {
			name.WriteByte('/')
		}
		name.WriteString(q.Name)
	}
	switch name.String() {
	case "EventId":
		return ua.MustVariant(e.id)
	case "EventType":
		return ua.MustVariant(e.typ.id)
	case "SourceNode":
		return ua.MustVariant(e.source.id)
	case "SourceName":
		return ua.NewStringVariant(e.source.browseName.Name)
	case "Time", "ReceiveTime":
		return ua.NewDateTimeVariant(e.time)
	case "Message":
		return ua.MustVariant(ua.LocalizedText{Locale: "en", Text: e.message})
	case "Severity":
		return ua.MustVariant(e.severity)
	case "ConditionName":
		return ua.NewStringVariant("LevelAlarm")
	case "ConditionClassId":
		return ua.MustVariant(ua.NewNumericNodeID(0, 11165)) // ProcessConditionClassType
	case "BranchId":
		return ua.MustVariant(ua.NodeID{})
	case "Retain":
		return ua.NewBooleanVariant(e.retain)
	case "EnabledState":
		return ua.MustVariant(ua.LocalizedText{Locale: "en", Text: "Enabled"})
	case "EnabledState/Id":
		return ua.NewBooleanVariant(true)
	case "ActiveState":
		return ua.MustVariant(ua.LocalizedText{Locale: "en", Text: map[bool]string{true: "Active", false: "Inactive"}[e.active]})
	case "ActiveState/Id":
		return ua.NewBooleanVariant(e.active)
	case "AckedState":
		return ua.MustVariant(ua.LocalizedText{Locale: "en", Text: map[bool]string{true: "Acknowledged", false: "Unacknowledged"}[e.acked]})
	case "AckedState/Id":
		return ua.NewBooleanVariant(e.acked)
	case "Quality":
		return ua.MustVariant(ua.StatusGood)
	case "LastSeverity":
		return ua.MustVariant(e.lastSev)
	case "Comment":
		return ua.MustVariant(ua.LocalizedText{})
	case "ClientUserId":
		return ua.NewStringVariant("")
	}
	return ua.Variant{}
}

// eventFilter is a checked EventFilter.
type eventFilter struct {
	selects []ua.SimpleAttributeOperand
	types   []*node // per select clause, its TypeDefinitionId node (nil: BaseEventType)
	where   []ua.ContentFilterElement
}

// supportedOperators maps the where clause operators we evaluate to their
// operand counts (-1: two or more).
var supportedOperators = map[ua.FilterOperator]int{
	ua.FilterOperatorEquals: 2, ua.FilterOperatorIsNull: 1, ua.FilterOperatorGreaterThan: 2,
	ua.FilterOperatorLessThan: 2, ua.FilterOperatorGreaterThanOrEqual: 2, ua.FilterOperatorLessThanOrEqual: 2,
	ua.FilterOperatorLike: 2, ua.FilterOperatorNot: 1, ua.FilterOperatorBetween: 3, ua.FilterOperatorInList: -1,
	ua.FilterOperatorAnd: 2, ua.FilterOperatorOr: 2, ua.FilterOperatorOfType: 1,
}

const maxFilterElements = 64

// newEventFilter checks an EventFilter.
func (s *Server) newEventFilter(f *ua.EventFilter) (*eventFilter, ua.EventFilterResult, ua.StatusCode) {
	var res ua.EventFilterResult
	if len(f.SelectClauses) == 0 || len(f.SelectClauses) > maxFilterElements || len(f.WhereClause.Elements) > maxFilterElements {
		return nil, res, ua.StatusBadEventFilterInvalid
	}
	base := s.as.ns0(ua.ID_BaseEventType)
	ef := &eventFilter{selects: f.SelectClauses, types: make([]*node, len(f.SelectClauses)), where: f.WhereClause.Elements}
	bad := false
	res.SelectClauseResults = make([]ua.StatusCode, len(f.SelectClauses))
	for i := range f.SelectClauses {
		c := &f.SelectClauses[i]
		st := ua.StatusGood
		t := s.as.get(c.TypeDefinitionID)
		switch {
		case c.TypeDefinitionID.IsNull():
			t = base
		case t == nil || !isSubtype(t, base):
			st = ua.StatusBadTypeDefinitionInvalid
		case c.AttributeID != attrValue && c.AttributeID != attrNodeID:
			st = ua.StatusBadAttributeIdInvalid
		case c.IndexRange != "":
			st = ua.StatusBadIndexRangeInvalid
		}
		ef.types[i] = t
		res.SelectClauseResults[i] = st
		bad = bad || st != ua.StatusGood
	}
	if n := len(f.WhereClause.Elements); n > 0 {
		res.WhereClauseResult.ElementResults = make([]ua.ContentFilterElementResult, n)
		for i := range f.WhereClause.Elements {
			el := &f.WhereClause.Elements[i]
			er := &res.WhereClauseResult.ElementResults[i]
			want, ok := supportedOperators[el.FilterOperator]
			switch {
			case !ok:
				er.StatusCode = ua.StatusBadFilterOperatorUnsupported
			case (want >= 0 && len(el.FilterOperands) != want) || (want < 0 && len(el.FilterOperands) < 2):
				er.StatusCode = ua.StatusBadFilterOperandCountMismatch
			}
			er.OperandStatusCodes = make([]ua.StatusCode, len(el.FilterOperands))
			for j := range el.FilterOperands {
				switch op := el.FilterOperands[j].Value.(type) {
				case *ua.ElementOperand:
					// Only later elements: no cycles.
					if int(op.Index) <= i || int(op.Index) >= n {
						er.OperandStatusCodes[j] = ua.StatusBadFilterOperandInvalid
					}
				case *ua.LiteralOperand:
				case *ua.SimpleAttributeOperand:
					if op.AttributeID != attrValue && op.AttributeID != attrNodeID {
						er.OperandStatusCodes[j] = ua.StatusBadAttributeIdInvalid
					}
				default:
					er.OperandStatusCodes[j] = ua.StatusBadFilterOperandInvalid
				}
				if er.OperandStatusCodes[j] != ua.StatusGood && er.StatusCode == ua.StatusGood {
					er.StatusCode = ua.StatusBadFilterOperandInvalid
				}
			}
			if el.FilterOperator == ua.FilterOperatorOfType && len(el.FilterOperands) == 1 {
				ok := false
				if lit, isLit := el.FilterOperands[0].Value.(*ua.LiteralOperand); isLit {
					id, isID := lit.Value.Value().(ua.NodeID)
					ok = isID && s.as.get(id) != nil
				}
				if !ok {
					er.StatusCode = ua.StatusBadFilterOperandInvalid
				}
			}
			bad = bad || er.StatusCode != ua.StatusGood
		}
	}
	if bad {
		return nil, res, ua.StatusBadEventFilterInvalid
	}
	// A result with nothing but Good in it need not be sent.
	res = ua.EventFilterResult{}
	return ef, res, ua.StatusGood
}

// fields evaluates the filter on e: the selected fields, or nil when the where
// clause does not match.
func (f *eventFilter) fields(e *simEvent, as *addressSpace) []ua.Variant {
	if len(f.where) > 0 {
		v := f.eval(0, e, as)
		if !v.Boolean() {
			return nil
		}
	}
	out := make([]ua.Variant, len(f.selects))
	for i := range f.selects {
		if t := f.types[i]; t != nil && isSubtype(e.typ, t) {
			out[i] = e.field(f.selects[i].BrowsePath, f.selects[i].AttributeID)
		}
	}
	return out
}

// eval evaluates where clause element i.
func (f *eventFilter) eval(i int, e *simEvent, as *addressSpace) ua.Variant {
	el := &f.where[i]
	op := func(j int) ua.Variant {
		switch o := el.FilterOperands[j].Value.(type) {
		case *ua.ElementOperand:
			return f.eval(int(o.Index), e, as)
		case *ua.LiteralOperand:
			return o.Value
		case *ua.SimpleAttributeOperand:
			return e.field(o.BrowsePath, o.AttributeID)
		}
		return ua.Variant{}
	}
	b := ua.NewBooleanVariant
	switch el.FilterOperator {
	case ua.FilterOperatorEquals:
		x, y := op(0), op(1)
		c, ok := compare(&x, &y)
		return b(ok && c == 0)
	case ua.FilterOperatorIsNull:
		x := op(0)
		return b(x.IsNull())
	case ua.FilterOperatorGreaterThan, ua.FilterOperatorLessThan, ua.FilterOperatorGreaterThanOrEqual, ua.FilterOperatorLessThanOrEqual:
		x, y := op(0), op(1)
		c, ok := compare(&x, &y)
		if !ok {
			return b(false)
		}
		switch el.FilterOperator {
		case ua.FilterOperatorGreaterThan:
			return b(c > 0)
		case ua.FilterOperatorLessThan:
			return b(c < 0)
		case ua.FilterOperatorGreaterThanOrEqual:
			return b(c >= 0)
		}
		return b(c <= 0)
	case ua.FilterOperatorBetween:
		x, lo, hi := op(0), op(1), op(2)
		c1, ok1 := compare(&x, &lo)
		c2, ok2 := compare(&x, &hi)
		return b(ok1 && ok2 && c1 >= 0 && c2 <= 0)
	case ua.FilterOperatorInList:
		x := op(0)
		for j := 1; j < len(el.FilterOperands); j++ {
			y := op(j)
			if c, ok := compare(&x, &y); ok && c == 0 {
				return b(true)
			}
		}
		return b(false)
	case ua.FilterOperatorLike:
		x, p := op(0), op(1)
		return b(like(textOf(&x), textOf(&p)))
	case ua.FilterOperatorNot:
		x := op(0)
		return b(!x.Boolean())
	case ua.FilterOperatorAnd:
		x, y := op(0), op(1)
		return b(x.Boolean() && y.Boolean())
	case ua.FilterOperatorOr:
		x, y := op(0), op(1)
		return b(x.Boolean() || y.Boolean())
	case ua.FilterOperatorOfType:
		x := op(0)
		id, _ := x.Value().(ua.NodeID)
		return b(isSubtype(e.typ, as.get(id)))
	}
	return ua.Variant{}
}

// compare orders two operands: numbers numerically, text by text, node ids and
// others by equality (c is 0 or 1).
func compare(x, y *ua.Variant) (int, bool) {
	if a, ok := x.AsFloat64(); ok {
		if b, ok := y.AsFloat64(); ok {
			switch {
			case a < b:
				return -1, true
			case a > b:
				return 1, true
			}
			return 0, true
		}
	}
	if x.Type() == ua.TypeDateTime && y.Type() == ua.TypeDateTime {
		return cmpInt(int64(x.DateTime()), int64(y.DateTime())), true
	}
	tx, okx := textValue(x)
	ty, oky := textValue(y)
	if okx && oky {
		return strings.Compare(tx, ty), true
	}
	if x.IsNull() || y.IsNull() {
		return 0, false
	}
	if x.Equal(y) {
		return 0, true
	}
	return 1, true
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func textValue(v *ua.Variant) (string, bool) {
	switch v.Type() {
	case ua.TypeString, ua.TypeXmlElement:
		return v.Str(), !v.IsArray()
	case ua.TypeLocalizedText:
		lt, ok := v.Value().(ua.LocalizedText)
		return lt.Text, ok
	case ua.TypeQualifiedName:
		q, ok := v.Value().(ua.QualifiedName)
		return q.Name, ok
	}
	return "", false
}

func textOf(v *ua.Variant) string { t, _ := textValue(v); return t }

// like matches s against a Like pattern: % any run, _ any one character
// (the bracket forms are not supported and match literally).
func like(s, p string) bool {
	if p == "" {
		return s == ""
	}
	switch p[0] {
	case '%':
		for i := 0; i <= len(s); i++ {
			if like(s[i:], p[1:]) {
				return true
			}
		}
		return false
	case '_':
		return s != "" && like(s[1:], p[1:])
	}
	return s != "" && s[0] == p[0] && like(s[1:], p[1:])
}

// --- the simulated alarm source ----------------------------------------------

// alarmSource raises the simulated alarms' events.
type alarmSource struct {
	srv      *Server
	interval time.Duration
	sources  []*alarm
	server   *node // the Server object: notifier of all events
	notifier *node // ns=1;s=Alarms
	next     int
	count    atomic.Uint64
	mu       sync.Mutex // serializes raise
}

// alarm is one source's alarm state.
type alarm struct {
	node      *node
	typ       *node
	condition ua.NodeID
	active    bool
	severity  uint16
	step      int
}

var alarmSeverities = []uint16{300, 500, 700, 900}

func (s *Server) buildAlarms(b *builder, objects *node) {
	as := b.as
	a := &alarmSource{srv: s, interval: s.cfg.Sim.AlarmInterval, server: as.ns0(ua.ID_Server)}
	s.alarms = a
	notifier := b.object(objects, ua.ID_Organizes, ua.NewStringNodeID(1, "Alarms"), "Alarms", ua.ID_BaseObjectType)
	notifier.eventNotifier = byte(ua.EventNotifierTypeSubscribeToEvents)
	notifier.events = &eventSource{}
	as.link(a.server, ua.ID_HasNotifier, notifier)
	a.notifier = notifier
	for i := 1; i <= s.cfg.Sim.AlarmSources; i++ {
		id := fmt.Sprintf("Alarms.Tank%d", i)
		src := b.object(notifier, ua.ID_HasComponent, ua.NewStringNodeID(1, id), fmt.Sprintf("Tank%d", i), ua.ID_BaseObjectType)
		src.eventNotifier = byte(ua.EventNotifierTypeSubscribeToEvents)
		src.events = &eventSource{}
		as.link(notifier, ua.ID_HasEventSource, src)
		typ := as.ns0(ua.ID_LimitAlarmType)
		if i%2 == 0 {
			typ = as.ns0(ua.ID_OffNormalAlarmType)
		}
		as.link(src, ua.ID_GeneratesEvent, typ)
		a.sources = append(a.sources, &alarm{node: src, typ: typ, condition: ua.NewStringNodeID(1, id+".LevelAlarm"), severity: 100})
	}
}

// run raises an alarm event every interval until ctx ends.
func (a *alarmSource) run(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	if a == nil || a.interval <= 0 || len(a.sources) == 0 {
		return
	}
	t := time.NewTicker(a.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.mu.Lock()
			al := a.sources[a.next%len(a.sources)]
			a.next++
			al.step++
			al.active = !al.active
			last := al.severity
			if al.active {
				al.severity = alarmSeverities[al.step%len(alarmSeverities)]
			} else {
				al.severity = 100
			}
			state := "normal"
			if al.active {
				state = "high"
			}
			e := &simEvent{typ: al.typ, source: al.node, condition: al.condition, severity: al.severity, lastSev: last,
				active: al.active, retain: al.active, message: fmt.Sprintf("%s level %s", al.node.browseName.Name, state)}
			a.mu.Unlock()
			a.raise(e)
		}
	}
}

// raise delivers e to the event items of its source, the Alarms object and the
// Server object.
func (a *alarmSource) raise(e *simEvent) {
	n := a.count.Add(1)
	e.id = make([]byte, 16)
	binary.BigEndian.PutUint64(e.id, uint64(a.srv.start.UnixNano()))
	binary.BigEndian.PutUint64(e.id[8:], n)
	e.time = ua.Now()
	a.srv.stats.events.Add(1)
	for _, nd := range []*node{e.source, a.notifier, a.server} {
		if nd == nil || nd.events == nil {
			continue
		}
		es := nd.events
		es.mu.Lock()
		for _, it := range es.items {
			sub := it.sub
			sub.mu.Lock()
			if !sub.closed && !it.removed && it.mode != ua.MonitoringModeDisabled {
				if fields := it.evFilter.fields(e, a.srv.as); fields != nil {
					it.pushEvent(fields)
				}
			}
			sub.mu.Unlock()
		}
		es.mu.Unlock()
	}
}

// generate raises an event on demand (the GenerateEvent method): from the first
// alarm source, or the Alarms object when there is none.
func (a *alarmSource) generate(severity uint16, message string) {
	e := &simEvent{typ: a.srv.as.ns0(ua.ID_SystemEventType), source: a.notifier, severity: severity, lastSev: severity, message: message}
	if len(a.sources) > 0 {
		al := a.sources[0]
		e.typ, e.source, e.condition, e.active, e.retain = al.typ, al.node, al.condition, true, true
	}
	a.raise(e)
}
