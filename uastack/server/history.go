package server

import (
	"encoding/binary"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// HistoryRead (Part 4 §5.10.3) of the generated variables' raw values (Part
// 11 §6.4.3.2, ReadRawModifiedDetails without IsReadModified and
// ReturnBounds), when SimConfig.History makes them Historizing: a generator
// computes the value of any tick, so a read of [StartTime, EndTime) returns
// the ticks in it that lie within History of now, oldest first, at most
// NumValuesPerNode at a time (0: all, up to maxHistoryValues) with a
// continuation point for the rest. Continuation points are the session's, at
// most MaxHistoryContinuationPoints; ReleaseContinuationPoints frees them.

// maxHistoryValues bounds the values of one node in one response.
const maxHistoryValues = 10000

// histCont is where a history read goes on: the next tick to return and the
// first one past the end.
type histCont struct {
	n    *node
	next int64
	end  int64
	per  int
}

func (s *Server) historyRead(sess *session, ch *channel, r *uasc.Request, m *ua.HistoryReadRequest) {
	switch {
	case len(m.NodesToRead) == 0:
		s.fault(ch, r, ua.StatusBadNothingToDo)
		return
	case uint32(len(m.NodesToRead)) > s.cfg.MaxNodesPerHistoryReadData:
		s.fault(ch, r, ua.StatusBadTooManyOperations)
		return
	case m.TimestampsToReturn > ua.TimestampsToReturnNeither:
		s.fault(ch, r, ua.StatusBadTimestampsToReturnInvalid)
		return
	}
	details, ok := m.HistoryReadDetails.Value.(*ua.ReadRawModifiedDetails)
	results := make([]ua.HistoryReadResult, len(m.NodesToRead))
	now := timeNowUnix()
	for i := range m.NodesToRead {
		rv := &m.NodesToRead[i]
		res := &results[i]
		var c *histCont
		if len(rv.ContinuationPoint) > 0 {
			sess.mu.Lock()
			c = sess.hcps[string(rv.ContinuationPoint)]
			delete(sess.hcps, string(rv.ContinuationPoint))
			sess.mu.Unlock()
			if c == nil || c.n.id != rv.NodeID {
				res.StatusCode = ua.StatusBadContinuationPointInvalid
				continue
			}
		}
		if m.ReleaseContinuationPoints {
			continue
		}
		if c == nil {
			if !ok || details.IsReadModified || details.ReturnBounds {
				res.StatusCode = ua.StatusBadHistoryOperationUnsupported
				continue
			}
			n := s.as.get(rv.NodeID)
			switch {
			case n == nil:
				res.StatusCode = ua.StatusBadNodeIdUnknown
				continue
			case n.gen == nil || n.accessLevel&accessHistoryRead == 0:
				res.StatusCode = ua.StatusBadHistoryOperationUnsupported
				continue
			case details.StartTime == 0 || details.EndTime <= details.StartTime:
				// A forward read of a range only.
				res.StatusCode = ua.StatusBadInvalidTimestampArgument
				continue
			}
			g := n.gen
			oldest := g.tickAt(now - int64(s.cfg.Sim.History))
			current := g.tickAt(now)
			c = &histCont{n: n, next: max(g.tickFrom(details.StartTime), oldest), end: min(g.tickFrom(details.EndTime), current+1)}
			c.per = int(details.NumValuesPerNode)
			if c.per <= 0 || c.per > maxHistoryValues {
				c.per = maxHistoryValues
			}
		}
		count := int(max(min(c.end-c.next, int64(c.per)), 0))
		if count == 0 {
			res.StatusCode = ua.StatusGoodNoData
			res.HistoryData = ua.NewExtensionObject(&ua.HistoryData{DataValues: []ua.DataValue{}})
			continue
		}
		vals := make([]ua.DataValue, count)
		for k := range vals {
			dv := &vals[k]
			c.n.gen.sample(c.next+int64(k), dv)
			switch m.TimestampsToReturn {
			case ua.TimestampsToReturnServer:
				dv.ServerTimestamp, dv.SourceTimestamp = dv.SourceTimestamp, 0
			case ua.TimestampsToReturnBoth:
				dv.ServerTimestamp = dv.SourceTimestamp
			case ua.TimestampsToReturnNeither:
				dv.SourceTimestamp = 0
			}
		}
		res.HistoryData = ua.NewExtensionObject(&ua.HistoryData{DataValues: vals})
		c.next += int64(count)
		if c.next < c.end {
			cp, st := sess.addHistoryContinuation(c, s.cfg.MaxHistoryContinuationPoints)
			if st != ua.StatusGood {
				res.StatusCode = st
				continue
			}
			res.ContinuationPoint = cp
		}
	}
	s.respond(ch, r, &ua.HistoryReadResponse{Results: results})
}

// tickFrom is the first tick that begins at or after t.
func (g *generator) tickFrom(t ua.DateTime) int64 {
	ns := (int64(t) - 116444736000000000) * 100
	if ns <= g.start {
		return 0
	}
	return (ns - g.start + g.period - 1) / g.period
}

// addHistoryContinuation keeps c for a later HistoryRead and returns its
// continuation point, or BadNoContinuationPoints at the session's limit.
func (sess *session) addHistoryContinuation(c *histCont, limit int) ([]byte, ua.StatusCode) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.closed.Load() {
		return nil, ua.StatusBadSessionClosed
	}
	if sess.hcps == nil {
		sess.hcps = map[string]*histCont{}
	}
	if len(sess.hcps) >= limit {
		return nil, ua.StatusBadNoContinuationPoints
	}
	sess.lastCP++
	cp := binary.BigEndian.AppendUint64([]byte{'h'}, sess.lastCP)
	sess.hcps[string(cp)] = c
	return cp, ua.StatusGood
}
