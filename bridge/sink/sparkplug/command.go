package sparkplug

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/uagate/gateway/bridge/sink/sparkplug/sparkplugpb"
	"github.com/uagate/gateway/uastack/ua"
)

// Commands: NCMD's Node Control/Rebirth asks for a new birth; a DCMD's
// metrics are writes to the OPC UA nodes behind them, which a Commander
// authorises and carries out. Without one every DCMD is refused (default
// deny). DCMDs wait in a bounded queue for one worker; a full queue drops
// the DCMD (counted), never blocking the MQTT client.

// Commander authorises and carries out the writes a DCMD asks for: it
// decides whether the caller may write each field (the gateway's command
// authorisation) and writes the values with OPC UA Write.
type Commander interface {
	// WriteMetrics returns one result per write, in order: nil when the
	// value was written, else why not (ErrDenied wrapped when the caller
	// may not write it).
	WriteMetrics(ctx context.Context, req WriteRequest) []error
}

// ErrDenied is wrapped by the error of a write that is not allowed.
var ErrDenied = errors.New("sparkplug: write not allowed")

// WriteRequest is a DCMD's writes.
type WriteRequest struct {
	// Caller names who asks: "sparkplug:<sink>" (MQTT does not say which
	// client published the DCMD; the broker's ACLs decide who may).
	Caller string
	// Sink is the node's sink name; Host its primary host id ("" without
	// one), the one host application that should command it.
	Sink, Host string
	Device     string // the Sparkplug device id
	Writes     []MetricWrite
}

// MetricWrite is one metric of a DCMD: the field behind it and the value,
// of the field's built-in type.
type MetricWrite struct {
	Metric string // the Sparkplug metric name
	Group  string // writer group
	Writer string // dataset writer
	Field  string
	Node   string // the field's node id
	Value  ua.Variant
}

// commandTimeout bounds one DCMD's writes.
const commandTimeout = 30 * time.Second

type command struct {
	device  string
	payload []byte
}

// onNCMD honours Node Control/Rebirth (3.0 §6.4.18): a rebirth at the
// session loop's next turn, without a new MQTT session or bdSeq.
func (n *Node) onNCMD(payload []byte) {
	var p pb.Payload
	if err := proto.Unmarshal(payload, &p); err != nil {
		n.log.Warn("sparkplug: NCMD does not decode", "err", err)
		return
	}
	for _, m := range p.Metrics {
		if m.GetName() == MetricRebirth {
			if m.GetBooleanValue() {
				n.rebirth.Store(true)
				n.poke()
			}
			continue
		}
		n.st.commandsDenied.Add(1)
		n.log.Warn("sparkplug: NCMD of an unknown metric ignored", "metric", m.GetName(), "alias", m.GetAlias())
	}
}

// onDCMD queues a DCMD for the command worker.
func (n *Node) onDCMD(device string, payload []byte) {
	select {
	case n.cmds <- command{device: device, payload: payload}:
	default:
		n.st.commandsBusy.Add(1)
		n.log.Warn("sparkplug: DCMD dropped: the command queue is full", "device", device)
	}
}

// commandWorker carries the DCMDs out one at a time.
func (n *Node) commandWorker() {
	for {
		select {
		case <-n.ctx.Done():
			return
		case c := <-n.cmds:
			n.dcmd(c)
		}
	}
}

// dcmd resolves a DCMD's metrics to fields and hands them to the
// Commander.
func (n *Node) dcmd(c command) {
	var p pb.Payload
	if err := proto.Unmarshal(c.payload, &p); err != nil {
		n.log.Warn("sparkplug: DCMD does not decode", "device", c.device, "err", err)
		n.st.commandsDenied.Add(1)
		return
	}
	var d *device
	for _, x := range *n.devices.Load() {
		if x.id == c.device && !x.removed.Load() {
			d = x
		}
	}
	var dm *devMetrics
	if d != nil {
		dm = d.metrics.Load()
	}
	if dm == nil {
		n.st.commandsDenied.Add(uint64(len(p.Metrics)))
		n.log.Warn("sparkplug: DCMD for an unknown device", "device", c.device)
		return
	}
	req := WriteRequest{Caller: "sparkplug:" + n.cfg.Name, Sink: n.cfg.Name, Host: n.cfg.PrimaryHostID, Device: c.device}
	for _, m := range p.Metrics {
		n.st.commands.Add(1)
		md := findMetric(dm, m)
		if md == nil {
			n.st.commandsDenied.Add(1)
			n.log.Warn("sparkplug: DCMD of an unknown metric", "device", c.device, "metric", m.GetName(), "alias", m.GetAlias())
			continue
		}
		v, err := variantOf(m, md)
		if err != nil {
			n.st.commandsDenied.Add(1)
			n.log.Warn("sparkplug: DCMD value refused", "device", c.device, "metric", md.name, "err", err)
			continue
		}
		pt := dm.parts[md.part]
		req.Writes = append(req.Writes, MetricWrite{Metric: md.name, Group: pt.group.Name(), Writer: pt.writer,
			Field: md.field, Node: md.node, Value: v})
	}
	if len(req.Writes) == 0 {
		return
	}
	if n.cfg.Commands == nil {
		n.st.commandsDenied.Add(uint64(len(req.Writes)))
		n.log.Warn("sparkplug: DCMD refused: no command handler allows writes", "device", c.device, "writes", len(req.Writes))
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, commandTimeout)
	defer cancel()
	res := n.cfg.Commands.WriteMetrics(ctx, req)
	for i, w := range req.Writes {
		var err error
		if i < len(res) {
			err = res[i]
		} else {
			err = errors.New("no result")
		}
		switch {
		case err == nil:
			n.log.Info("sparkplug: DCMD written", "device", c.device, "metric", w.Metric, "node", w.Node, "value", w.Value.String())
		case errors.Is(err, ErrDenied):
			n.st.commandsDenied.Add(1)
			n.log.Warn("sparkplug: DCMD write denied", "device", c.device, "metric", w.Metric, "err", err)
		default:
			n.st.commandsFailed.Add(1)
			n.log.Warn("sparkplug: DCMD write failed", "device", c.device, "metric", w.Metric, "err", err)
		}
	}
}

// findMetric finds a command's metric by alias, else by name.
func findMetric(dm *devMetrics, m *pb.Payload_Metric) *metricDef {
	for i := range dm.defs {
		d := &dm.defs[i]
		if d.event {
			continue
		}
		if (m.Alias != nil && d.alias == m.GetAlias()) || (m.Alias == nil && d.name == m.GetName()) {
			return d
		}
	}
	return nil
}

// variantOf converts a command's value to the built-in type of the field
// (3.0 §6.4.16: the proto field of the metric's datatype; a value out of
// the type's range, or in another field, is refused).
func variantOf(m *pb.Payload_Metric, md *metricDef) (ua.Variant, error) {
	var v ua.Variant
	if m.GetIsNull() || m.Value == nil {
		return v, errors.New("no value")
	}
	if md.array {
		return v, fmt.Errorf("writing %s arrays is not supported", md.uaType)
	}
	intIn := func(lo, hi int64) (int64, error) {
		x, ok := m.Value.(*pb.Payload_Metric_IntValue)
		if !ok {
			return 0, fmt.Errorf("a %s takes int_value", md.dtype)
		}
		n := int64(x.IntValue)
		if lo < 0 {
			n = int64(int32(x.IntValue)) // two's complement
		}
		if n < lo || n > hi {
			return 0, fmt.Errorf("%d is out of the range of %s", n, md.uaType)
		}
		return n, nil
	}
	var err error
	var i int64
	switch md.uaType {
	case ua.TypeBoolean:
		x, ok := m.Value.(*pb.Payload_Metric_BooleanValue)
		if !ok {
			return v, errors.New("a Boolean takes boolean_value")
		}
		v.SetBoolean(x.BooleanValue)
	case ua.TypeSByte:
		if i, err = intIn(math.MinInt8, math.MaxInt8); err == nil {
			v.SetSByte(int8(i))
		}
	case ua.TypeByte:
		if i, err = intIn(0, math.MaxUint8); err == nil {
			v.SetByte(byte(i))
		}
	case ua.TypeInt16:
		if i, err = intIn(math.MinInt16, math.MaxInt16); err == nil {
			v.SetInt16(int16(i))
		}
	case ua.TypeUInt16:
		if i, err = intIn(0, math.MaxUint16); err == nil {
			v.SetUInt16(uint16(i))
		}
	case ua.TypeInt32:
		if i, err = intIn(math.MinInt32, math.MaxInt32); err == nil {
			v.SetInt32(int32(i))
		}
	case ua.TypeUInt32:
		if i, err = intIn(0, math.MaxUint32); err == nil {
			v.SetUInt32(uint32(i))
		}
	case ua.TypeInt64, ua.TypeUInt64, ua.TypeDateTime:
		x, ok := m.Value.(*pb.Payload_Metric_LongValue)
		if !ok {
			return v, fmt.Errorf("a %s takes long_value", md.dtype)
		}
		switch md.uaType {
		case ua.TypeInt64:
			v.SetInt64(int64(x.LongValue))
		case ua.TypeUInt64:
			v.SetUInt64(x.LongValue)
		default:
			v.SetDateTime(ua.NewDateTime(time.UnixMilli(int64(x.LongValue))))
		}
	case ua.TypeFloat:
		x, ok := m.Value.(*pb.Payload_Metric_FloatValue)
		if !ok {
			return v, errors.New("a Float takes float_value")
		}
		v.SetFloat(x.FloatValue)
	case ua.TypeDouble:
		switch x := m.Value.(type) {
		case *pb.Payload_Metric_DoubleValue:
			v.SetDouble(x.DoubleValue)
		case *pb.Payload_Metric_FloatValue:
			v.SetDouble(float64(x.FloatValue))
		default:
			return v, errors.New("a Double takes double_value")
		}
	case ua.TypeString:
		x, ok := m.Value.(*pb.Payload_Metric_StringValue)
		if !ok {
			return v, errors.New("a String takes string_value")
		}
		v.SetString(x.StringValue)
	default:
		return v, fmt.Errorf("writing %s values is not supported", md.uaType)
	}
	return v, err
}

// onState takes the primary host's STATE (3.0 §6.4.8: JSON with online and
// timestamp). An online STATE counts when its timestamp is not older than
// the last STATE's, an offline one when not older than the last online
// one's (an old will delivered late is ignored).
func (n *Node) onState(payload []byte) {
	var s struct {
		Online    *bool  `json:"online"`
		Timestamp *int64 `json:"timestamp"`
	}
	if err := json.Unmarshal(payload, &s); err != nil || s.Online == nil || s.Timestamp == nil {
		n.log.Warn("sparkplug: STATE of the primary host is not the 3.0 JSON {online, timestamp}", "host", n.cfg.PrimaryHostID, "payload", string(payload[:min(len(payload), 64)]))
		return
	}
	n.st.stateMessages.Add(1)
	ts := *s.Timestamp
	n.mu.Lock()
	h := &n.host
	valid := !h.known || (*s.Online && ts >= h.timestamp) || (!*s.Online && ts >= h.onlineTS)
	if valid {
		h.known, h.online, h.timestamp = true, *s.Online, ts
		if h.online {
			h.onlineTS = ts
		}
	}
	n.mu.Unlock()
	if valid {
		n.log.Info("sparkplug: primary host state", "host", n.cfg.PrimaryHostID, "online", *s.Online, "timestamp", ts)
		n.poke()
	} else {
		n.log.Info("sparkplug: an older STATE of the primary host ignored", "host", n.cfg.PrimaryHostID, "online", *s.Online, "timestamp", ts)
	}
}
