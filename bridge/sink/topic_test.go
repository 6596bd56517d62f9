package sink

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func mqttSanitize(b byte) byte {
	if b == '+' || b == '#' || b == 0 {
		return '_'
	}
	return b
}

func TestTopics(t *testing.T) {
	ts, err := NewTopics(TopicTemplates{
		Data:     "opcua/json/data/{PublisherId}/{WriterGroup}/{DataSetWriter}",
		MetaData: "opcua/json/metadata/{PublisherId}/{WriterGroup}/{DataSetWriter}",
		Status:   "opcua/json/status/{PublisherId}",
		Field:    "uns/{PublisherId}/x-{WriterGroup}-y/{Field}",
	}, '/', mqttSanitize, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		k    Kind
		a    Addr
		want string
	}{
		{KindData, Addr{Publisher: "p", Group: "g", Writer: "w"}, "opcua/json/data/p/g/w"},
		{KindData, Addr{Publisher: "p", Group: "g"}, "opcua/json/data/p/g"}, // batched: last level dropped
		{KindMetaData, Addr{Publisher: "p", Group: "g", Writer: "w"}, "opcua/json/metadata/p/g/w"},
		{KindStatus, Addr{Publisher: "p", Group: "g", Writer: "w"}, "opcua/json/status/p"},
		{KindField, Addr{Publisher: "p", Group: "g", Writer: "w", Field: "T+1#"}, "uns/p/x-g-y/T_1_"},
		{KindField, Addr{Publisher: "p", Field: "f"}, "uns/p/x--y/f"}, // literals keep the level
		{KindData, Addr{Publisher: "p", Group: "g", Writer: "w"}, "opcua/json/data/p/g/w"},
	} {
		if got := ts.Topic(c.k, &c.a); got != c.want {
			t.Errorf("Topic(%v, %+v) = %q, want %q", c.k, c.a, got, c.want)
		}
		if got := ts.Render(c.k, &c.a); got != c.want {
			t.Errorf("Render(%v, %+v) = %q, want %q", c.k, c.a, got, c.want)
		}
	}
	nats, err := NewTopics(TopicTemplates{Data: "opcua.json.data.{PublisherId}.{WriterGroup}.{DataSetWriter}"}, '.',
		func(b byte) byte {
			if b == '.' || b == ' ' || b == '*' || b == '>' {
				return '_'
			}
			return b
		}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := nats.Topic(KindData, &Addr{Publisher: "a.b", Group: "g 1", Writer: "*>"}); got != "opcua.json.data.a_b.g_1.__" {
		t.Errorf("nats subject %q", got)
	}
	if got := nats.Topic(KindField, &Addr{}); got != "" {
		t.Errorf("no template: %q", got)
	}
}

func TestTopicTemplateErrors(t *testing.T) {
	for _, c := range []struct{ tmpl, want string }{
		{"a/{Publisher}/b", "unknown placeholder {Publisher}"},
		{"a/{PublisherId", "unclosed {"},
	} {
		_, err := NewTopics(TopicTemplates{MetaData: c.tmpl}, '/', nil, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "metadata topic") {
			t.Errorf("%q: %v, want %q", c.tmpl, err, c.want)
		}
	}
}

func BenchmarkTopicsCached(b *testing.B) {
	ts, _ := NewTopics(TopicTemplates{Data: "opcua/json/data/{PublisherId}/{WriterGroup}/{DataSetWriter}"}, '/', nil, 0)
	a := Addr{Publisher: "uagate", Group: "line1", Writer: "temperatures"}
	b.ReportAllocs()
	for b.Loop() {
		ts.Topic(KindData, &a)
	}
}

// TestTopicsCache: 5,000 writers' topics (1,000,000 items in writers of
// 200) are rendered once each and then served from the cache, exactly; a
// sink that sees more topics than the bound (a per-field sink of a million
// nodes) keeps at most the bound.
func TestTopicsCache(t *testing.T) {
	ts, err := NewTopics(TopicTemplates{Data: "opcua/json/data/{PublisherId}/{WriterGroup}/{DataSetWriter}"}, '/', nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]Addr, 5000)
	for i := range addrs {
		addrs[i] = Addr{Publisher: "p", Group: fmt.Sprintf("g%03d", i/50), Writer: fmt.Sprintf("w%d", i)}
	}
	for range 3 {
		for i := range addrs {
			if got, want := ts.Topic(KindData, &addrs[i]), ts.Render(KindData, &addrs[i]); got != want {
				t.Fatalf("topic %q, want %q", got, want)
			}
		}
	}
	if m := ts.Misses(); m != uint64(len(addrs)) {
		t.Errorf("%d renders for %d topics looked up 3 times each, want one per topic", m, len(addrs))
	}

	small, err := NewTopics(TopicTemplates{Data: "plant/{WriterGroup}/{Field}"}, '/', nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		a := Addr{Publisher: "p", Group: "g", Field: strconv.Itoa(i)}
		if got := small.Topic(KindData, &a); got != "plant/g/"+strconv.Itoa(i) {
			t.Fatalf("topic %q", got)
		}
		if len(small.cache) > 1000 {
			t.Fatalf("cache of %d topics, bound 1000", len(small.cache))
		}
	}
}
