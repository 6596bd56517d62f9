package bridge

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

// The compiled plan: what a writer group runs with, derived once from its
// configuration and Options by NewWriterGroup. The configuration comes with
// bridge/config's defaults applied and validated (config.Load and
// config.Parse do both; so do WriterGroup.ApplyDefaults with
// Config.Validate, and config.ExpandWriterGroup keeps them): config is the
// one place of the defaults and the checks. The plan maps settings onto the
// pipeline's modes, and refuses a configuration whose defaults were not
// applied (ErrNotDefaulted), because the zero values config replaces would
// run as something else here or not at all.

// ErrNotDefaulted is returned by NewWriterGroup and AddWriter for a
// configuration that lacks bridge/config's defaults; the error names the
// first setting found unset.
var ErrNotDefaulted = errors.New("bridge: configuration without config's defaults (config.Load applies them; or WriterGroup.ApplyDefaults, then Config.Validate)")

// plan is the part of a WriterGroup that its configuration and Options fix;
// it does not change after NewWriterGroup.
type plan struct {
	name         string // the group's
	endpointName string // config's endpoint name (Stats)
	publisher    string // PublisherId of every message
	endpoint     string // URL written per value in the samples format
	interval     time.Duration
	keyFrames    uint64
	keepAlive    time.Duration // <= 0: none
	maxSize      int
	maxUnacked   int
	maxNotifs    uint32 // notifications per Publish; 0: the server's bound
	single       bool   // one DataSetMessage per NetworkMessage
	samples      bool   // OPC Publisher's samples format
	headerMode   jsonenc.Mode
	fieldMode    jsonenc.Mode
	fieldMask    jsonenc.DataSetFieldContentMask
	fieldDV      bool // per-field payload is a DataValue
	fieldKeep    bool // per-field messages are retained
	resumeEvery  time.Duration
	log          *slog.Logger
}

// compile derives the plan of cfg and opts.
func compile(cfg *config.WriterGroup, opts *Options) (plan, error) {
	if err := checkDefaulted(cfg); err != nil {
		return plan{}, err
	}
	p := plan{
		name:         cfg.Name,
		endpointName: cfg.Endpoint,
		publisher:    opts.PublisherID,
		endpoint:     opts.EndpointURL,
		interval:     cfg.PublishingInterval.D(),
		keyFrames:    uint64(max(cfg.KeyFrameCount, 1)),
		maxSize:      cfg.MaxMessageSize,
		maxUnacked:   cfg.MaxUnacked,
		maxNotifs:    uint32(max(cfg.MaxNotificationsPerPublish, 0)), // negative: the server's bound
		single:       cfg.MessageShape == config.ShapeSingle,
		samples:      cfg.Format == config.FormatSamples,
		headerMode:   jsonenc.Compact,
		fieldKeep:    !opts.FieldNoRetain,
		resumeEvery:  opts.ResumeInterval,
		log:          opts.Logger,
	}
	if p.publisher == "" {
		p.publisher = config.DefaultPublisherID
	}
	if p.endpoint == "" && opts.Session != nil {
		p.endpoint = opts.Session.URL()
	}
	if p.resumeEvery <= 0 {
		p.resumeEvery = DefaultResumeInterval
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if ka := cfg.KeepAlive.D(); ka > 0 { // negative: none
		p.keepAlive = max(ka, p.interval)
	}
	if cfg.Encoding == config.EncodingVerbose {
		p.headerMode = jsonenc.Verbose
	}
	p.fieldMode = p.headerMode
	switch cfg.FieldEncoding {
	case config.FieldDataValue:
		p.fieldMask = jsonenc.FieldMaskStatusCode | jsonenc.FieldMaskSourceTimestamp | jsonenc.FieldMaskServerTimestamp
		if len(cfg.FieldContent) > 0 {
			p.fieldMask = 0
			for _, m := range cfg.FieldContent {
				bit, ok := fieldContentMasks[m]
				if !ok {
					return plan{}, fmt.Errorf("bridge: writer group %s: field content %q: want %s", cfg.Name, m, strings.Join(config.FieldContents, ", "))
				}
				p.fieldMask |= bit
			}
		}
	case config.FieldRaw:
		// RawData is an option of VerboseEncoding (Part 6 §5.4.1): bare values.
		p.fieldMask = jsonenc.FieldMaskRawData
		p.fieldMode = jsonenc.Verbose
	}
	switch opts.FieldPayload {
	case "", config.PayloadValue:
	case config.PayloadDataValue:
		p.fieldDV = true
	default:
		return plan{}, fmt.Errorf("bridge: writer group %s: per-field payload %q: want %s or %s", cfg.Name, opts.FieldPayload, config.PayloadValue, config.PayloadDataValue)
	}
	return p, nil
}

// fieldContentMasks maps the names of config.FieldContents to their
// DataSetFieldContentMask bits.
var fieldContentMasks = map[string]jsonenc.DataSetFieldContentMask{
	config.ContentStatusCode:        jsonenc.FieldMaskStatusCode,
	config.ContentSourceTimestamp:   jsonenc.FieldMaskSourceTimestamp,
	config.ContentServerTimestamp:   jsonenc.FieldMaskServerTimestamp,
	config.ContentSourcePicoSeconds: jsonenc.FieldMaskSourcePicoSeconds,
	config.ContentServerPicoSeconds: jsonenc.FieldMaskServerPicoSeconds,
}

// keepAliveCount is the subscription's KeepAliveCount: the server's
// keep-alive every keepAlive, in publishing intervals; 0 (the client's
// default) when the group sends none.
func (p *plan) keepAliveCount() uint32 {
	if p.keepAlive <= 0 {
		return 0
	}
	return uint32(min(max(p.keepAlive/p.interval, 1), 10000))
}

// checkDefaulted refuses a writer group whose defaults were not applied:
// it looks at the settings config fills, not at their values (config
// validates those).
func checkDefaulted(cfg *config.WriterGroup) error {
	if unset := cfg.Undefaulted(); unset != "" {
		return fmt.Errorf("%w: writer group %q: %s", ErrNotDefaulted, cfg.Name, unset)
	}
	return nil
}

// checkWriterDefaulted is checkDefaulted for one writer and its fields.
func checkWriterDefaulted(group string, wc *config.DataSetWriter) error {
	if unset := wc.Undefaulted(); unset != "" {
		return fmt.Errorf("%w: writer group %q: %s", ErrNotDefaulted, group, unset)
	}
	return nil
}

// itemKey identifies equal monitoring parameters, so that items share one
// *client.ItemOptions (the client keeps one copy per distinct pointer).
type itemKey struct {
	sampling      time.Duration
	queue         uint32
	discardNewest bool
	filter        bool
	trigger       ua.DataChangeTrigger
	deadbandType  uint32
	deadband      float64
}

// itemOptions returns the monitoring parameters of data field fc (its
// settings, defaults applied); with dedup, one shared *client.ItemOptions
// per distinct set.
func itemOptions(fc *config.Field, dedup map[itemKey]*client.ItemOptions) *client.ItemOptions {
	sampling := fc.SamplingInterval.D()
	db := fc.Deadband
	key := itemKey{sampling: sampling, queue: fc.QueueSize, discardNewest: !*fc.DiscardOldest, trigger: ua.DataChangeTriggerStatusValue}
	switch fc.Trigger {
	case config.TriggerStatus:
		key.trigger, key.filter = ua.DataChangeTriggerStatus, true
	case config.TriggerStatusValueTimestamp:
		key.trigger, key.filter = ua.DataChangeTriggerStatusValueTimestamp, true
	}
	switch db.Type {
	case config.DeadbandAbsolute:
		key.filter, key.deadbandType, key.deadband = true, uint32(ua.DeadbandTypeAbsolute), db.Value
	case config.DeadbandPercent:
		key.filter, key.deadbandType, key.deadband = true, uint32(ua.DeadbandTypePercent), db.Value
	}
	if o := dedup[key]; o != nil {
		return o
	}
	o := &client.ItemOptions{QueueSize: key.queue, DiscardNewest: key.discardNewest, SamplingInterval: sampling}
	if sampling == 0 {
		o.SamplingInterval = client.SamplingFastest
	}
	if key.filter {
		switch key.deadbandType {
		case uint32(ua.DeadbandTypeAbsolute):
			o.DataChange = client.AbsoluteDeadband(db.Value)
		case uint32(ua.DeadbandTypePercent):
			o.DataChange = client.PercentDeadband(db.Value)
		default:
			o.DataChange = &ua.DataChangeFilter{}
		}
		o.DataChange.Trigger = key.trigger
	}
	if dedup != nil {
		dedup[key] = o
	}
	return o
}
