package server

import (
	"encoding/binary"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// attributeValid reports whether node class n has attribute attr.
func attributeValid(n *node, attr uint32) bool {
	c := n.class
	switch attr {
	case attrNodeID, attrNodeClass, attrBrowseName, attrDisplayName, attrDescription, attrWriteMask, attrUserWriteMask:
		return true
	case attrIsAbstract:
		return c == ua.NodeClassObjectType || c == ua.NodeClassVariableType || c == ua.NodeClassReferenceType || c == ua.NodeClassDataType
	case attrSymmetric, attrInverseName:
		return c == ua.NodeClassReferenceType
	case attrContainsNoLoops:
		return c == ua.NodeClassView
	case attrEventNotifier:
		return c == ua.NodeClassObject || c == ua.NodeClassView
	case attrValue, attrDataType, attrValueRank, attrArrayDimensions:
		return c == ua.NodeClassVariable || c == ua.NodeClassVariableType
	case attrAccessLevel, attrUserAccessLevel, attrMinimumSamplingInterval, attrHistorizing, attrAccessLevelEx:
		return c == ua.NodeClassVariable
	case attrExecutable, attrUserExecutable:
		return c == ua.NodeClassMethod
	}
	return false
}

// readAttribute returns an attribute of n (valid per attributeValid). now, when
// not 0, is the ServerTimestamp of a Value.
func (s *Server) readAttribute(n *node, attr uint32, now ua.DateTime) ua.DataValue {
	var v ua.Variant
	switch attr {
	case attrNodeID:
		v = ua.MustVariant(n.id)
	case attrNodeClass:
		v = ua.NewInt32Variant(int32(n.class))
	case attrBrowseName:
		v = ua.MustVariant(n.browseName)
	case attrDisplayName:
		v = ua.MustVariant(n.displayName)
	case attrDescription:
		v = ua.MustVariant(n.description)
	case attrWriteMask, attrUserWriteMask:
		v = ua.NewUInt32Variant(0)
	case attrIsAbstract:
		v = ua.NewBooleanVariant(n.isAbstract)
	case attrSymmetric:
		v = ua.NewBooleanVariant(n.symmetric)
	case attrInverseName:
		v = ua.MustVariant(n.inverseName)
	case attrContainsNoLoops:
		v = ua.NewBooleanVariant(false)
	case attrEventNotifier:
		v = ua.MustVariant(n.eventNotifier)
	case attrValue:
		return s.readValue(n, now)
	case attrDataType:
		v = ua.MustVariant(n.dataType)
	case attrValueRank:
		v = ua.NewInt32Variant(n.valueRank)
	case attrArrayDimensions:
		if n.arrayDims != nil {
			v = ua.MustVariant(n.arrayDims)
		}
	case attrAccessLevel, attrUserAccessLevel:
		v = ua.MustVariant(n.accessLevel)
	case attrAccessLevelEx:
		v = ua.NewUInt32Variant(uint32(n.accessLevel))
	case attrMinimumSamplingInterval:
		v = ua.NewDoubleVariant(n.minSampling)
	case attrHistorizing:
		v = ua.NewBooleanVariant(n.accessLevel&accessHistoryRead != 0)
	case attrExecutable, attrUserExecutable:
		v = ua.NewBooleanVariant(true)
	default:
		return ua.DataValue{Status: ua.StatusBadAttributeIdInvalid}
	}
	return ua.DataValue{Value: v}
}

// readValue returns the current value of a variable.
func (s *Server) readValue(n *node, now ua.DateTime) ua.DataValue {
	var dv ua.DataValue
	switch {
	case n.gen != nil:
		ns := timeNowUnix()
		n.gen.sample(n.gen.tickAt(ns), &dv)
		if now == 0 {
			now = unixToDateTime(ns)
		}
	case n.static != nil:
		dv = *n.static.load()
	case n.dyn != nil:
		if now == 0 {
			now = ua.Now()
		}
		dv = n.dyn(now)
	}
	dv.ServerTimestamp = now
	return dv
}

func (s *Server) read(sess *session, ch *channel, r *uasc.Request, m *ua.ReadRequest) {
	switch {
	case len(m.NodesToRead) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.NodesToRead)) > s.cfg.MaxNodesPerRead:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	case m.MaxAge < 0 || math.IsNaN(m.MaxAge):
		s.fault(ch, r, ua.StatusBadMaxAgeInvalid)
		return
	case m.TimestampsToReturn < ua.TimestampsToReturnSource || m.TimestampsToReturn > ua.TimestampsToReturnNeither:
		s.fault(ch, r, ua.StatusBadTimestampsToReturnInvalid)
		return
	}
	now := ua.Now()
	results := make([]ua.DataValue, len(m.NodesToRead))
	for i := range m.NodesToRead {
		rv := &m.NodesToRead[i]
		n := s.as.get(rv.NodeID)
		switch {
		case n == nil:
			results[i].Status = ua.StatusBadNodeIdUnknown
			continue
		case !attributeValid(n, rv.AttributeID):
			results[i].Status = ua.StatusBadAttributeIdInvalid
			continue
		case !rv.DataEncoding.IsNull() && !(rv.DataEncoding.NamespaceIndex == 0 && rv.DataEncoding.Name == "Default Binary"):
			results[i].Status = ua.StatusBadDataEncodingInvalid
			continue
		case rv.IndexRange != "" && rv.AttributeID != attrValue:
			results[i].Status = ua.StatusBadIndexRangeNoData
			continue
		}
		dv := s.readAttribute(n, rv.AttributeID, now)
		if rv.AttributeID != attrValue {
			results[i] = dv
			continue
		}
		if rv.IndexRange != "" {
			if st := applyIndexRange(&dv.Value, rv.IndexRange); st != ua.StatusGood {
				results[i] = ua.DataValue{Status: st}
				continue
			}
		}
		switch m.TimestampsToReturn {
		case ua.TimestampsToReturnSource:
			dv.ServerTimestamp = 0
		case ua.TimestampsToReturnServer:
			dv.SourceTimestamp = 0
		case ua.TimestampsToReturnNeither:
			dv.SourceTimestamp, dv.ServerTimestamp = 0, 0
		}
		results[i] = dv
	}
	s.respond(ch, r, &ua.ReadResponse{Results: results})
}

// applyIndexRange cuts a one-dimensional array (or a String / ByteString) to
// "i" or "i:j".
func applyIndexRange(v *ua.Variant, rng string) ua.StatusCode {
	lo, hi, ok := parseRange(rng)
	if !ok {
		return ua.StatusBadIndexRangeInvalid
	}
	if v.IsArray() && len(v.ArrayDimensions()) == 0 {
		rv := reflect.ValueOf(v.Value())
		if lo >= rv.Len() {
			return ua.StatusBadIndexRangeNoData
		}
		hi = min(hi, rv.Len()-1)
		nv, err := ua.NewArrayVariant(v.Type(), rv.Slice(lo, hi+1).Interface())
		if err != nil {
			return ua.StatusBadIndexRangeInvalid
		}
		*v = nv
		return ua.StatusGood
	}
	switch v.Type() {
	case ua.TypeString:
		str := v.Str()
		if lo >= len(str) {
			return ua.StatusBadIndexRangeNoData
		}
		v.SetString(str[lo : min(hi, len(str)-1)+1])
		return ua.StatusGood
	case ua.TypeByteString:
		b, _ := v.Value().([]byte)
		if lo >= len(b) {
			return ua.StatusBadIndexRangeNoData
		}
		*v = ua.MustVariant(b[lo : min(hi, len(b)-1)+1])
		return ua.StatusGood
	}
	return ua.StatusBadIndexRangeNoData
}

func parseRange(s string) (lo, hi int, ok bool) {
	a, b, dash := strings.Cut(s, ":")
	x, err := strconv.ParseUint(a, 10, 31)
	if err != nil {
		return 0, 0, false
	}
	if !dash {
		return int(x), int(x), true
	}
	y, err := strconv.ParseUint(b, 10, 31)
	if err != nil || y <= x {
		return 0, 0, false
	}
	return int(x), int(y), true
}

func (s *Server) write(sess *session, ch *channel, r *uasc.Request, m *ua.WriteRequest) {
	switch {
	case len(m.NodesToWrite) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.NodesToWrite)) > s.cfg.MaxNodesPerWrite:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	}
	results := make([]ua.StatusCode, len(m.NodesToWrite))
	for i := range m.NodesToWrite {
		wv := &m.NodesToWrite[i]
		n := s.as.get(wv.NodeID)
		switch {
		case n == nil:
			results[i] = ua.StatusBadNodeIdUnknown
		case !attributeValid(n, wv.AttributeID):
			results[i] = ua.StatusBadAttributeIdInvalid
		case wv.AttributeID != attrValue:
			results[i] = ua.StatusBadNotWritable
		case wv.IndexRange != "":
			results[i] = ua.StatusBadWriteNotSupported
		default:
			results[i] = s.writeValue(n, wv.Value)
		}
	}
	s.respond(ch, r, &ua.WriteResponse{Results: results})
}

// writeValue stores a new value in a writable variable.
func (s *Server) writeValue(n *node, dv ua.DataValue) ua.StatusCode {
	if n.class != ua.NodeClassVariable || n.static == nil || n.accessLevel&accessWrite == 0 {
		return ua.StatusBadNotWritable
	}
	want := builtinDataType(s.as, n.dataType)
	v := &dv.Value
	switch {
	case v.IsNull():
		return ua.StatusBadTypeMismatch
	case want != ua.TypeNull && v.Type() != want:
		return ua.StatusBadTypeMismatch
	case n.valueRank == -1 && v.IsArray():
		return ua.StatusBadTypeMismatch
	case n.valueRank >= 1 && (!v.IsArray() || (len(v.ArrayDimensions()) > 0 && len(v.ArrayDimensions()) != int(n.valueRank))):
		return ua.StatusBadTypeMismatch
	}
	now := ua.Now()
	if dv.SourceTimestamp == 0 {
		dv.SourceTimestamp = now
	}
	dv.ServerTimestamp = now
	n.static.store(dv)
	return ua.StatusGood
}

// continuation is the rest of a Browse result.
type continuation struct {
	refs []ua.ReferenceDescription
	max  int
}

func (s *Server) browse(sess *session, ch *channel, r *uasc.Request, m *ua.BrowseRequest) {
	switch {
	case len(m.NodesToBrowse) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.NodesToBrowse)) > s.cfg.MaxNodesPerBrowse:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	case !m.View.ViewID.IsNull():
		s.fault(ch, r, ua.StatusBadViewIdUnknown)
		return
	}
	maxRefs := int(m.RequestedMaxReferencesPerNode)
	if maxRefs == 0 || maxRefs > s.cfg.MaxReferencesPerNode {
		maxRefs = s.cfg.MaxReferencesPerNode
	}
	results := make([]ua.BrowseResult, len(m.NodesToBrowse))
	for i := range m.NodesToBrowse {
		results[i] = s.browseOne(sess, &m.NodesToBrowse[i], maxRefs)
	}
	s.respond(ch, r, &ua.BrowseResponse{Results: results})
}

func (s *Server) browseOne(sess *session, bd *ua.BrowseDescription, maxRefs int) ua.BrowseResult {
	n := s.as.get(bd.NodeID)
	if n == nil {
		return ua.BrowseResult{StatusCode: ua.StatusBadNodeIdUnknown}
	}
	if bd.BrowseDirection < ua.BrowseDirectionForward || bd.BrowseDirection > ua.BrowseDirectionBoth {
		return ua.BrowseResult{StatusCode: ua.StatusBadBrowseDirectionInvalid}
	}
	var filter *node
	if !bd.ReferenceTypeID.IsNull() {
		filter = s.as.get(bd.ReferenceTypeID)
		if filter == nil || filter.class != ua.NodeClassReferenceType {
			return ua.BrowseResult{StatusCode: ua.StatusBadReferenceTypeIdInvalid}
		}
	}
	var refs []ua.ReferenceDescription
	for _, rf := range n.refs {
		switch {
		case bd.BrowseDirection == ua.BrowseDirectionForward && !rf.forward,
			bd.BrowseDirection == ua.BrowseDirectionInverse && rf.forward,
			!refMatches(rf.typ, filter, bd.IncludeSubtypes),
			bd.NodeClassMask != 0 && bd.NodeClassMask&uint32(rf.target.class) == 0:
			continue
		}
		refs = append(refs, describe(rf, bd.ResultMask))
	}
	res := ua.BrowseResult{References: refs}
	if refs == nil {
		res.References = []ua.ReferenceDescription{}
	}
	if len(refs) > maxRefs {
		res.References = refs[:maxRefs:maxRefs]
		cp, st := sess.addContinuation(&continuation{refs: refs[maxRefs:], max: maxRefs}, s.cfg.MaxBrowseContinuationPoints)
		if st != ua.StatusGood {
			return ua.BrowseResult{StatusCode: st}
		}
		res.ContinuationPoint = cp
	}
	return res
}

// describe makes the ReferenceDescription of rf with the fields mask asks for.
func describe(rf ref, mask uint32) ua.ReferenceDescription {
	t := rf.target
	d := ua.ReferenceDescription{NodeID: ua.NewExpandedNodeID(t.id)}
	m := ua.BrowseResultMask(mask)
	if m&ua.BrowseResultMaskReferenceTypeID != 0 {
		d.ReferenceTypeID = rf.typ.id
	}
	if m&ua.BrowseResultMaskIsForward != 0 {
		d.IsForward = rf.forward
	}
	if m&ua.BrowseResultMaskNodeClass != 0 {
		d.NodeClass = t.class
	}
	if m&ua.BrowseResultMaskBrowseName != 0 {
		d.BrowseName = t.browseName
	}
	if m&ua.BrowseResultMaskDisplayName != 0 {
		d.DisplayName = t.displayName
	}
	if m&ua.BrowseResultMaskTypeDefinition != 0 && t.typeDef != nil && (t.class == ua.NodeClassObject || t.class == ua.NodeClassVariable) {
		d.TypeDefinition = ua.NewExpandedNodeID(t.typeDef.id)
	}
	return d
}

// addContinuation stores a continuation point, at most limit per session.
func (sess *session) addContinuation(c *continuation, limit int) ([]byte, ua.StatusCode) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.cps == nil {
		sess.cps = map[string]*continuation{}
	}
	if len(sess.cps) >= limit {
		return nil, ua.StatusBadNoContinuationPoints
	}
	sess.lastCP++
	cp := binary.BigEndian.AppendUint64(make([]byte, 0, 8), sess.lastCP)
	sess.cps[string(cp)] = c
	return cp, ua.StatusGood
}

func (s *Server) browseNext(sess *session, ch *channel, r *uasc.Request, m *ua.BrowseNextRequest) {
	switch {
	case len(m.ContinuationPoints) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.ContinuationPoints)) > s.cfg.MaxNodesPerBrowse:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	}
	results := make([]ua.BrowseResult, len(m.ContinuationPoints))
	for i, cp := range m.ContinuationPoints {
		sess.mu.Lock()
		c := sess.cps[string(cp)]
		if c != nil {
			delete(sess.cps, string(cp))
		}
		sess.mu.Unlock()
		switch {
		case c == nil:
			results[i].StatusCode = ua.StatusBadContinuationPointInvalid
		case m.ReleaseContinuationPoints:
			results[i].References = []ua.ReferenceDescription{}
		case len(c.refs) <= c.max:
			results[i].References = c.refs
		default:
			results[i].References = c.refs[:c.max:c.max]
			c.refs = c.refs[c.max:]
			sess.mu.Lock()
			if sess.cps != nil {
				sess.cps[string(cp)] = c
				results[i].ContinuationPoint = cp
			} else {
				results[i].StatusCode = ua.StatusBadSessionClosed
			}
			sess.mu.Unlock()
		}
	}
	s.respond(ch, r, &ua.BrowseNextResponse{Results: results})
}

func (s *Server) translate(sess *session, ch *channel, r *uasc.Request, m *ua.TranslateBrowsePathsToNodeIDsRequest) {
	switch {
	case len(m.BrowsePaths) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.BrowsePaths)) > s.cfg.MaxNodesPerTranslateBrowsePathsToNodeIDs:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	}
	results := make([]ua.BrowsePathResult, len(m.BrowsePaths))
	for i := range m.BrowsePaths {
		results[i] = s.translateOne(&m.BrowsePaths[i])
	}
	s.respond(ch, r, &ua.TranslateBrowsePathsToNodeIDsResponse{Results: results})
}

// maxTranslateTargets bounds the nodes a browse path may fan out to.
const maxTranslateTargets = 10000

func (s *Server) translateOne(bp *ua.BrowsePath) ua.BrowsePathResult {
	start := s.as.get(bp.StartingNode)
	if start == nil {
		return ua.BrowsePathResult{StatusCode: ua.StatusBadNodeIdUnknown}
	}
	els := bp.RelativePath.Elements
	if len(els) == 0 {
		return ua.BrowsePathResult{StatusCode: ua.StatusBadNothingToDo}
	}
	current := []*node{start}
	for _, el := range els {
		if el.TargetName.IsNull() {
			return ua.BrowsePathResult{StatusCode: ua.StatusBadBrowseNameInvalid}
		}
		var filter *node
		if !el.ReferenceTypeID.IsNull() {
			filter = s.as.get(el.ReferenceTypeID)
			if filter == nil || filter.class != ua.NodeClassReferenceType {
				return ua.BrowsePathResult{StatusCode: ua.StatusBadReferenceTypeIdInvalid}
			}
		}
		var next []*node
		seen := map[*node]bool{}
		for _, c := range current {
			for _, rf := range c.refs {
				if rf.forward == el.IsInverse || !refMatches(rf.typ, filter, el.IncludeSubtypes) ||
					rf.target.browseName != el.TargetName || seen[rf.target] {
					continue
				}
				seen[rf.target] = true
				next = append(next, rf.target)
			}
		}
		if len(next) == 0 {
			return ua.BrowsePathResult{StatusCode: ua.StatusBadNoMatch}
		}
		if len(next) > maxTranslateTargets {
			return ua.BrowsePathResult{StatusCode: ua.StatusBadTooManyMatches}
		}
		current = next
	}
	res := ua.BrowsePathResult{Targets: make([]ua.BrowsePathTarget, len(current))}
	for i, n := range current {
		res.Targets[i] = ua.BrowsePathTarget{TargetID: ua.NewExpandedNodeID(n.id), RemainingPathIndex: math.MaxUint32}
	}
	return res
}

func (s *Server) registerNodes(sess *session, ch *channel, r *uasc.Request, m *ua.RegisterNodesRequest) {
	switch {
	case len(m.NodesToRegister) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.NodesToRegister)) > s.cfg.MaxNodesPerRegisterNodes:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	}
	s.respond(ch, r, &ua.RegisterNodesResponse{RegisteredNodeIDs: m.NodesToRegister})
}

func (s *Server) unregisterNodes(sess *session, ch *channel, r *uasc.Request, m *ua.UnregisterNodesRequest) {
	switch {
	case len(m.NodesToUnregister) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.NodesToUnregister)) > s.cfg.MaxNodesPerRegisterNodes:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	}
	s.respond(ch, r, &ua.UnregisterNodesResponse{})
}

// callContext is what a method implementation may use.
type callContext struct {
	srv    *Server
	sess   *session
	object *node
}

// methodFunc implements a method; its input arguments were checked against
// the method's InputArguments.
type methodFunc func(c *callContext, in []ua.Variant) ([]ua.Variant, ua.StatusCode)

func (s *Server) call(sess *session, ch *channel, r *uasc.Request, m *ua.CallRequest) {
	switch {
	case len(m.MethodsToCall) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.MethodsToCall)) > s.cfg.MaxNodesPerMethodCall:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	}
	results := make([]ua.CallMethodResult, len(m.MethodsToCall))
	for i := range m.MethodsToCall {
		results[i] = s.callOne(sess, &m.MethodsToCall[i])
	}
	s.respond(ch, r, &ua.CallResponse{Results: results})
}

func (s *Server) callOne(sess *session, c *ua.CallMethodRequest) ua.CallMethodResult {
	obj := s.as.get(c.ObjectID)
	if obj == nil {
		return ua.CallMethodResult{StatusCode: ua.StatusBadNodeIdUnknown}
	}
	meth := s.as.get(c.MethodID)
	if meth == nil || meth.class != ua.NodeClassMethod || meth.method == nil {
		return ua.CallMethodResult{StatusCode: ua.StatusBadMethodInvalid}
	}
	owned := false
	for _, rf := range obj.refs {
		if rf.forward && rf.target == meth && rf.typ.id.Numeric == ua.ID_HasComponent {
			owned = true
			break
		}
	}
	if !owned {
		return ua.CallMethodResult{StatusCode: ua.StatusBadMethodInvalid}
	}
	switch {
	case len(c.InputArguments) < len(meth.inArgs):
		return ua.CallMethodResult{StatusCode: ua.StatusBadArgumentsMissing}
	case len(c.InputArguments) > len(meth.inArgs):
		return ua.CallMethodResult{StatusCode: ua.StatusBadTooManyArguments}
	}
	var argResults []ua.StatusCode
	for i, a := range meth.inArgs {
		v := &c.InputArguments[i]
		want := builtinDataType(s.as, a.DataType)
		if v.Type() != want || v.IsArray() != (a.ValueRank >= 1) {
			if argResults == nil {
				argResults = make([]ua.StatusCode, len(meth.inArgs))
			}
			argResults[i] = ua.StatusBadTypeMismatch
		}
	}
	if argResults != nil {
		return ua.CallMethodResult{StatusCode: ua.StatusBadInvalidArgument, InputArgumentResults: argResults}
	}
	out, st := meth.method(&callContext{srv: s, sess: sess, object: obj}, c.InputArguments)
	return ua.CallMethodResult{StatusCode: st, OutputArguments: out}
}

// buildMethods makes the simulated methods in Demo/Methods.
func (s *Server) buildMethods(b *builder, demo *node) {
	sid := func(s string) ua.NodeID { return ua.NewStringNodeID(1, s) }
	obj := b.object(demo, ua.ID_HasComponent, sid("Demo.Methods"), "Methods", ua.ID_BaseObjectType)
	dt := func(t ua.TypeID) ua.NodeID { return ua.NewNumericNodeID(0, uint32(t)) }
	arg := func(name string, t ua.TypeID) ua.Argument {
		return ua.Argument{Name: name, DataType: dt(t), ValueRank: -1}
	}
	b.method(obj, sid("Demo.Methods.Add"), "Add",
		[]ua.Argument{arg("a", ua.TypeDouble), arg("b", ua.TypeDouble)}, []ua.Argument{arg("sum", ua.TypeDouble)},
		func(_ *callContext, in []ua.Variant) ([]ua.Variant, ua.StatusCode) {
			return []ua.Variant{ua.NewDoubleVariant(in[0].Double() + in[1].Double())}, ua.StatusGood
		})
	b.method(obj, sid("Demo.Methods.Multiply"), "Multiply",
		[]ua.Argument{arg("a", ua.TypeInt32), arg("b", ua.TypeInt32)}, []ua.Argument{arg("product", ua.TypeInt32)},
		func(_ *callContext, in []ua.Variant) ([]ua.Variant, ua.StatusCode) {
			p := int64(in[0].Int32()) * int64(in[1].Int32())
			if p > math.MaxInt32 || p < math.MinInt32 {
				return nil, ua.StatusBadOutOfRange
			}
			return []ua.Variant{ua.NewInt32Variant(int32(p))}, ua.StatusGood
		})
	b.method(obj, sid("Demo.Methods.Echo"), "Echo",
		[]ua.Argument{arg("text", ua.TypeString)}, []ua.Argument{arg("text", ua.TypeString)},
		func(_ *callContext, in []ua.Variant) ([]ua.Variant, ua.StatusCode) {
			return []ua.Variant{in[0]}, ua.StatusGood
		})
	b.method(obj, sid("Demo.Methods.Fail"), "Fail",
		[]ua.Argument{arg("status", ua.TypeStatusCode)}, nil,
		func(_ *callContext, in []ua.Variant) ([]ua.Variant, ua.StatusCode) {
			return nil, in[0].StatusCode()
		})
	b.method(obj, sid("Demo.Methods.GenerateEvent"), "GenerateEvent",
		[]ua.Argument{arg("severity", ua.TypeUInt16), arg("message", ua.TypeString)}, nil,
		func(c *callContext, in []ua.Variant) ([]ua.Variant, ua.StatusCode) {
			sev := in[0].UInt16()
			if sev < 1 || sev > 1000 {
				return nil, ua.StatusBadOutOfRange
			}
			c.srv.alarms.generate(sev, in[1].Str())
			return nil, ua.StatusGood
		})
}
