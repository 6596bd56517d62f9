package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/bridge/sink/mqttsink"
)

// A persistent MQTT session under scale-out belongs to a writer group, not
// to a replica. The session is the broker's state of one client id; with
// the replica's id in the client id, each replica would keep a session of
// its own, the groups would move between them, and every replica that ever
// ran (a pod's new name after each rollout) would leave a session at the
// broker that MQTT 3.1.1 never expires. So an MQTT sink with cleanSession
// false, under scale-out, connects once per writer group this replica
// holds, as <clientId>-<group>: the connection opens when the group starts
// here and closes when it stops here (its lease given up or lost), after
// the Output drained what the group handed it, and the next holder connects
// with the same client id and continues the same session. The lease makes
// one holder at a time; should two overlap for a moment, the broker closes
// the older connection, which is the one going away.
//
// Such a sink publishes no ua-status and sets no will: its connections end
// whenever a group moves, which says nothing of the publisher (give the
// status to a clean-session sink). Its Outputs are named <sink>/<group> in
// the status, the metrics and the logs; its latency histogram is the
// sink's.

// groupSink is a configured sink with an Output per writer group.
type groupSink struct {
	name     string // the configured sink's
	kind     string
	delivery config.Delivery
	perField *config.PerField
	make     func(group string) (sink.Sink, error)
}

// mqttGroupSink is MQTT sink m (mc: its sink configuration) with a session
// per writer group.
func mqttGroupSink(mc mqttsink.Config, m config.MQTTSink) groupSink {
	mc.SetDefaults() // the client id from the publisher id, before it goes
	return groupSink{name: m.Name, kind: "mqtt", delivery: m.Delivery, perField: m.PerField,
		make: func(group string) (sink.Sink, error) {
			c := mc
			c.Name = groupOutputName(mc.Name, group)
			c.ClientID = mc.ClientID + "-" + group
			c.PublisherID = "" // no ua-status, no will
			return newMQTTSink(c)
		}}
}

// check makes a sink of gs and closes it unused: what its configuration
// gets wrong is reported at start, not when a writer group comes.
func (gs groupSink) check() error {
	s, err := gs.make("check")
	if err != nil {
		return err
	}
	closeSink(s)
	return nil
}

// closeSink closes a sink that never connected.
func closeSink(s sink.Sink) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.Close(ctx)
}

// groupOutputName names writer group group's Output of sink name.
func groupOutputName(name, group string) string { return name + "/" + group }

// groupOutputs makes and starts writer group group's Outputs of the
// groupSinks (none without them).
func (gw *Gateway) groupOutputs(group string) ([]*runOutput, error) {
	var outs []*runOutput
	for _, gs := range gw.groupSinks {
		s, err := gs.make(group)
		if err == nil {
			var o *runOutput
			o, err = gw.newOutput(gs.kind, s, gs.name, gs.delivery, gs.perField)
			if err == nil {
				outs = append(outs, o)
				continue
			}
			closeSink(s) // made, but no Output owns it
		}
		gw.closeUnused(outs)
		return nil, fmt.Errorf("sinks.mqtt %s: %w", gs.name, err)
	}
	return outs, nil
}

// closeOutputs closes outs in parallel within ctx: each drains what it
// holds first (Output.Close).
func closeOutputs(ctx context.Context, gw *Gateway, outs []*runOutput) {
	var wg sync.WaitGroup
	for _, o := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := o.Close(ctx); err != nil {
				gw.log.Warn("sink close", "sink", o.Name(), "err", err)
			}
		}()
	}
	wg.Wait()
}

// closeGroupOutputs closes writer group rg's own Outputs, once the group
// stopped handing them messages.
func (gw *Gateway) closeGroupOutputs(ctx context.Context, rg *runGroup) {
	if p := rg.outs.Swap(nil); p != nil {
		closeOutputs(ctx, gw, *p)
	}
}

// allOutputs are the sinks' Outputs and, after them, the running writer
// groups' own in configuration order.
func (gw *Gateway) allOutputs() []*runOutput {
	if len(gw.groupSinks) == 0 {
		return gw.outputs
	}
	out := append([]*runOutput(nil), gw.outputs...)
	v := gw.view.Load()
	for _, wg := range v.cfg.WriterGroups {
		if rg := v.groups[wg.Name]; rg != nil {
			if p := rg.outs.Load(); p != nil {
				out = append(out, *p...)
			}
		}
	}
	return out
}
