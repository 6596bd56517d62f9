package sink

import (
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
