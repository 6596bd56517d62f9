package bridge

import "github.com/uagate/gateway/uastack/ua"

// Values the last run delivered, sent again.
//
// A server may send an item's last value again although the gateway had it:
// node-opcua does for every item when a session is activated on a new
// channel (the restart path, client.ResumeSession), and a subscription created
// anew begins with every item's current value, which, for a field that did
// not change while the gateway was away, is the one it delivered last. The
// client drops such resends within one process (it compares with the last
// values it delivered); a new process has not delivered anything yet. The
// group's Times (resume.Times, kept with the marks) hold the source timestamp
// of each field's last value the last run handed over: a field's first value
// in this run with that source timestamp is the same sample again. It is
// cached (key frames carry it) but not sent, so that no sink gets it twice.

// resentFromLastRun reports whether dv, for field s, is the value the last
// run delivered last (g.mu held; the hot path after a restart).
func (g *WriterGroup) resentFromLastRun(s int32, dv *ua.DataValue) bool {
	if g.fields[s].flags&fieldHasValue != 0 || dv.SourceTimestamp == 0 {
		return false
	}
	return int64(dv.SourceTimestamp) == g.prevTimes.Previous(int(s))
}

// visibleIn reports whether round r of ents (see nextRound) has a value to
// send.
func visibleIn(ents []entry, rounds int, r int32) bool {
	rk := int32(0)
	for k := range ents {
		if rounds > 0 {
			if rk = nextRound(ents, k, rk); rk != r {
				continue
			}
		}
		if !ents[k].silent() {
			return true
		}
	}
	return false
}
