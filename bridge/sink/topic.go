package sink

import (
	"fmt"
	"strings"
)

// TopicTemplates are the topic (or subject) templates of one sink, one per
// Kind. Placeholders: {PublisherId} {WriterGroup} {DataSetWriter} {Field},
// filled from the message's Addr. A level (the text between two separators)
// that holds a placeholder and renders empty is dropped with its separator,
// which is how a batched writer-group message (Addr.Writer "") goes to
// opcua/json/data/<PublisherId>/<WriterGroup>. An empty template means the
// sink does not publish that kind.
type TopicTemplates struct {
	Data     string
	MetaData string
	Status   string
	Field    string
}

// placeholders of a template part.
const (
	phNone uint8 = iota
	phPublisher
	phGroup
	phWriter
	phField
)

var placeholderNames = [...]string{
	phPublisher: "PublisherId",
	phGroup:     "WriterGroup",
	phWriter:    "DataSetWriter",
	phField:     "Field",
}

type topicPart struct {
	lit string
	ph  uint8
}

// topicTemplate is a parsed template: levels of parts.
type topicTemplate struct {
	levels [][]topicPart
}

func parseTopicTemplate(s string, sep byte) (topicTemplate, error) {
	var t topicTemplate
	if s == "" {
		return t, nil
	}
	for _, level := range strings.Split(s, string(sep)) {
		var parts []topicPart
		for level != "" {
			open := strings.IndexByte(level, '{')
			if open < 0 {
				parts = append(parts, topicPart{lit: level})
				break
			}
			if open > 0 {
				parts = append(parts, topicPart{lit: level[:open]})
			}
			end := strings.IndexByte(level[open:], '}')
			if end < 0 {
				return t, fmt.Errorf("topic template %q: unclosed {", s)
			}
			name := level[open+1 : open+end]
			ph := phNone
			for i, n := range placeholderNames {
				if n != "" && n == name {
					ph = uint8(i)
				}
			}
			if ph == phNone {
				return t, fmt.Errorf("topic template %q: unknown placeholder {%s} (want {PublisherId}, {WriterGroup}, {DataSetWriter} or {Field})", s, name)
			}
			parts = append(parts, topicPart{ph: ph})
			level = level[open+end+1:]
		}
		t.levels = append(t.levels, parts)
	}
	return t, nil
}

// appendTopic renders t for a into dst, passing placeholder values through
// sanitize byte by byte.
func (t *topicTemplate) appendTopic(dst []byte, a *Addr, sep byte, sanitize func(byte) byte) []byte {
	first := true
	for _, level := range t.levels {
		mark := len(dst)
		if !first {
			dst = append(dst, sep)
		}
		start := len(dst)
		hasPh := false
		for _, p := range level {
			if p.ph == phNone {
				dst = append(dst, p.lit...)
				continue
			}
			hasPh = true
			var v string
			switch p.ph {
			case phPublisher:
				v = a.Publisher
			case phGroup:
				v = a.Group
			case phWriter:
				v = a.Writer
			case phField:
				v = a.Field
			}
			for i := 0; i < len(v); i++ {
				dst = append(dst, sanitize(v[i]))
			}
		}
		if hasPh && len(dst) == start {
			dst = dst[:mark] // a placeholder level that came out empty
			continue
		}
		first = false
	}
	return dst
}

// DefaultTopicCacheSize is the most rendered topics a Topics keeps: a
// million items in 5,000 writers are 5,000 topics (about 100 B each in the
// cache). When a sink sees more (a per-field sink of a million nodes), the
// cache starts over when full, and topics are rendered as they come.
const DefaultTopicCacheSize = 1 << 16

// Topics maps a message's Kind and Addr to its topic through the sink's
// templates, keeping rendered topics in a bounded map so that the steady
// state renders and allocates nothing: the Addr strings come from the
// configuration, so a stream sees the same topics over and over. A miss
// renders the topic and allocates its string once. (A direct-mapped cache of
// 1,024 entries did this before: at 5,000 writers most messages missed.) Not
// safe for concurrent use: a sink calls it from Publish, which is
// serialised.
type Topics struct {
	tmpl     [4]topicTemplate // by Kind
	sep      byte
	sanitize func(byte) byte
	cache    map[topicKey]string
	max      int
	buf      []byte
	misses   uint64
}

type topicKey struct {
	kind Kind
	addr Addr
}

// NewTopics parses the templates. sep is the level separator ('/' for MQTT,
// '.' for NATS); sanitize maps each byte of a placeholder value (say, '.' to
// '_' for NATS); cacheSize bounds the topics kept, 0 means
// DefaultTopicCacheSize.
func NewTopics(t TopicTemplates, sep byte, sanitize func(byte) byte, cacheSize int) (*Topics, error) {
	ts := &Topics{sep: sep, sanitize: sanitize}
	if ts.sanitize == nil {
		ts.sanitize = func(b byte) byte { return b }
	}
	for k, s := range [...]string{KindData: t.Data, KindMetaData: t.MetaData, KindStatus: t.Status, KindField: t.Field} {
		var err error
		if ts.tmpl[k], err = parseTopicTemplate(s, sep); err != nil {
			return nil, fmt.Errorf("%s topic: %w", Kind(k), err)
		}
	}
	if cacheSize <= 0 {
		cacheSize = DefaultTopicCacheSize
	}
	ts.max, ts.cache = cacheSize, map[topicKey]string{}
	return ts, nil
}

// Topic returns the topic of a message of kind k at a, or "" when the sink
// has no template for k (or the kind is unknown).
func (ts *Topics) Topic(k Kind, a *Addr) string {
	if int(k) >= len(ts.tmpl) || ts.tmpl[k].levels == nil {
		return ""
	}
	key := topicKey{kind: k, addr: *a}
	if t, ok := ts.cache[key]; ok {
		return t
	}
	ts.misses++
	if len(ts.cache) >= ts.max {
		clear(ts.cache)
	}
	ts.buf = ts.tmpl[k].appendTopic(ts.buf[:0], a, ts.sep, ts.sanitize)
	t := string(ts.buf)
	ts.cache[key] = t
	return t
}

// Render renders a topic without the cache (for a status topic known at
// start, a last will, tests).
func (ts *Topics) Render(k Kind, a *Addr) string {
	if int(k) >= len(ts.tmpl) || ts.tmpl[k].levels == nil {
		return ""
	}
	return string(ts.tmpl[k].appendTopic(nil, a, ts.sep, ts.sanitize))
}

// Misses counts renders the cache could not serve.
func (ts *Topics) Misses() uint64 { return ts.misses }
