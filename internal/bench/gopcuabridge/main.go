// Command gopcuabridge is the baseline of `gateway bench`: the OPC UA → NATS
// bridge a user of the gopcua client (v0.8.0) writes, as Telegraf or Benthos
// with gopcua would run it. It subscribes to the first -items Load variables
// of the simulation server, and for every notification message builds one
// Part 14-like ua-data NetworkMessage per Load folder (a map per
// DataSetMessage payload, encoding/json) and publishes it with nats.go, at
// most once.
//
// It is deliberately ordinary code: what gopcua hands over (a channel of
// interface values, *ua.Variant with boxed values, time.Time timestamps) is
// used as it comes, the JSON is encoding/json over maps, nothing is pooled.
// That is the point of comparison; do not optimise it.
//
//	gopcuabridge -endpoint opc.tcp://127.0.0.1:4840 -nats nats://127.0.0.1:4222 -items 100000 -variables 1000
//
// It runs until SIGTERM or SIGINT, then deletes its subscriptions, closes the
// session and prints one line of totals to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"
	"github.com/nats-io/nats.go"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gopcuabridge:", err)
		os.Exit(1)
	}
}

// loadNode is the node id of variable v of Load folder f of the simulation
// server (uastack/server.LoadNode; not imported, so that the baseline's
// binary and memory hold gopcua and nats.go only).
func loadNode(f, v int) string { return fmt.Sprintf("ns=1;s=Load.F%03d.V%05d", f, v) }

// field is one DataSet field as a DataValue: the value and its source time.
type field struct {
	Value           any       `json:"Value"`
	SourceTimestamp time.Time `json:"SourceTimestamp"`
}

type dataSetMessage struct {
	DataSetWriterId   int              `json:"DataSetWriterId"`
	DataSetWriterName string           `json:"DataSetWriterName"`
	SequenceNumber    uint32           `json:"SequenceNumber"`
	MessageType       string           `json:"MessageType"`
	Payload           map[string]field `json:"Payload"`
}

type networkMessage struct {
	MessageId   string           `json:"MessageId"`
	MessageType string           `json:"MessageType"`
	PublisherId string           `json:"PublisherId"`
	Messages    []dataSetMessage `json:"Messages"`
}

// item is what a client handle stands for.
type item struct {
	folder int
	name   string
}

func run() error {
	endpoint := flag.String("endpoint", "", "OPC UA endpoint `URL` of the simulation server (security None)")
	natsURL := flag.String("nats", nats.DefaultURL, "NATS server `URL`")
	items := flag.Int("items", 1000, "`number` of Load variables to subscribe to: the first ones, folder by folder")
	variables := flag.Int("variables", 1000, "variables per Load folder of the simulation server (its -variables)")
	interval := flag.Duration("interval", 20*time.Millisecond, "publishing interval of the subscriptions")
	sampling := flag.Duration("sampling", 20*time.Millisecond, "sampling interval of the monitored items")
	queue := flag.Uint("queue", 10, "queue size of the monitored items")
	perSub := flag.Int("per-subscription", 10000, "monitored items per subscription")
	batch := flag.Int("batch", 1000, "monitored items per CreateMonitoredItems request")
	subject := flag.String("subject", "opcua.json.data.baseline.g.w", "NATS `subject` of the messages")
	flag.Parse()
	if *endpoint == "" {
		return errors.New("-endpoint is required")
	}
	if *items <= 0 || *variables <= 0 || *perSub <= 0 || *batch <= 0 {
		return errors.New("-items, -variables, -per-subscription and -batch must be positive")
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	nc, err := nats.Connect(*natsURL, nats.Name("gopcuabridge"))
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	defer nc.Close()

	c, err := opcua.NewClient(*endpoint,
		opcua.SecurityMode(ua.MessageSecurityModeNone),
		opcua.AutoReconnect(false),
		opcua.SessionTimeout(30*time.Second),
		opcua.RequestTimeout(2*time.Minute))
	if err != nil {
		return err
	}
	connCtx, cancel := context.WithTimeout(ctx, time.Minute)
	err = c.Connect(connCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("connect %s: %w", *endpoint, err)
	}
	defer c.Close(context.Background())

	// Handles are 1-based positions: the table is a slice, as a careful user
	// would write it (a map would cost the baseline more).
	names := make([]item, *items+1)
	for i := range *items {
		f, v := i / *variables, i%*variables
		names[i+1] = item{folder: f, name: fmt.Sprintf("V%05d", v)}
	}

	// The consumer drains the channel from the start: gopcua's publish loop
	// blocks on a full channel, and with it the creation of further items.
	// It is stopped after the subscriptions are deleted (defers run last
	// first), so that gopcua never blocks on the way out either.
	ch := make(chan *opcua.PublishNotificationData, 256)
	p := &publisher{nc: nc, subject: *subject, names: names, seq: map[int]uint32{}}
	consCtx, consCancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		errc <- p.run(consCtx, ch, logger)
	}()
	defer func() {
		consCancel()
		wg.Wait()
		_ = nc.Flush()
		fmt.Fprintf(os.Stderr, "gopcuabridge: %d notifications in %d messages\n", p.notifications, p.messages)
	}()

	var subs []*opcua.Subscription
	defer func() {
		for _, s := range subs {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = s.Cancel(cctx)
			cancel()
		}
	}()
	for start := 0; start < *items; start += *perSub {
		end := min(start+*perSub, *items)
		sub, err := c.Subscribe(ctx, &opcua.SubscriptionParameters{Interval: *interval}, ch)
		if err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		subs = append(subs, sub)
		if start > 0 && start%100000 == 0 {
			logger.Info("subscribing", "items", start, "of", *items)
		}
		for b := start; b < end; b += *batch {
			reqs := make([]*ua.MonitoredItemCreateRequest, 0, *batch)
			for i := b; i < min(b+*batch, end); i++ {
				id, err := ua.ParseNodeID(loadNode(i / *variables, i%*variables))
				if err != nil {
					return err
				}
				r := opcua.NewMonitoredItemCreateRequestWithDefaults(id, ua.AttributeIDValue, uint32(i+1))
				r.RequestedParameters.SamplingInterval = float64(*sampling) / float64(time.Millisecond)
				r.RequestedParameters.QueueSize = uint32(*queue)
				reqs = append(reqs, r)
			}
			res, err := sub.Monitor(ctx, ua.TimestampsToReturnSource, reqs...)
			if err != nil {
				return fmt.Errorf("create monitored items: %w", err)
			}
			for i, r := range res.Results {
				if r.StatusCode != ua.StatusOK {
					return fmt.Errorf("monitored item %s: %v", loadNode((b+i) / *variables, (b+i)%*variables), r.StatusCode)
				}
			}
		}
	}
	logger.Info("subscribed", "items", *items, "subscriptions", len(subs), "interval", *interval)
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}

// publisher turns notification messages into NATS messages; one goroutine
// (run) owns it: no locks.
type publisher struct {
	nc            *nats.Conn
	subject       string
	names         []item
	seq           map[int]uint32
	notifications int64
	messages      int64
}

func (p *publisher) run(ctx context.Context, ch <-chan *opcua.PublishNotificationData, logger *slog.Logger) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case d := <-ch:
			if d.Error != nil {
				logger.Warn("subscription", "err", d.Error)
				continue
			}
			if err := p.publish(d); err != nil {
				return err
			}
		}
	}
}

func (p *publisher) publish(d *opcua.PublishNotificationData) error {
	dcn, ok := d.Value.(*ua.DataChangeNotification)
	if !ok {
		return nil
	}
	// One NetworkMessage per folder (writer), as the gateway's "single"
	// message shape; a whole notification message would exceed NATS's
	// payload limit at 10,000 items.
	byFolder := map[int]map[string]field{}
	for _, it := range dcn.MonitoredItems {
		if int(it.ClientHandle) >= len(p.names) || it.ClientHandle == 0 || it.Value == nil {
			continue
		}
		n := p.names[it.ClientHandle]
		payload := byFolder[n.folder]
		if payload == nil {
			payload = map[string]field{}
			byFolder[n.folder] = payload
		}
		var v any
		if it.Value.Value != nil {
			v = it.Value.Value.Value()
		}
		payload[n.name] = field{Value: v, SourceTimestamp: it.Value.SourceTimestamp.UTC()}
	}
	for f, payload := range byFolder {
		p.seq[f]++
		s := p.seq[f]
		nm := networkMessage{
			MessageId:   fmt.Sprintf("%d-%d", f, s),
			MessageType: "ua-data",
			PublisherId: "baseline",
			Messages: []dataSetMessage{{
				DataSetWriterId: f + 1, DataSetWriterName: fmt.Sprintf("F%03d", f),
				SequenceNumber: s, MessageType: "ua-deltaframe", Payload: payload,
			}},
		}
		b, err := json.Marshal(&nm)
		if err != nil {
			return err
		}
		if err := p.nc.Publish(p.subject, b); err != nil {
			return fmt.Errorf("nats publish: %w", err)
		}
		p.notifications += int64(len(payload))
		p.messages++
	}
	return nil
}
