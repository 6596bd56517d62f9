//go:build !race

package sink

import "testing"

// Allocation tests: the race detector allocates on its own account, so they
// are built without it only (scripts/test.sh runs them in a step of their own).

func TestTopicsAllocs(t *testing.T) {
	ts, err := NewTopics(TopicTemplates{Data: "opcua/json/data/{PublisherId}/{WriterGroup}/{DataSetWriter}"}, '/', nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	addrs := []Addr{{Publisher: "p", Group: "g", Writer: "w1"}, {Publisher: "p", Group: "g", Writer: "w2"}, {Publisher: "p", Group: "g"}}
	for i := range addrs {
		ts.Topic(KindData, &addrs[i])
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		ts.Topic(KindData, &addrs[i%len(addrs)])
		i++
	}); n != 0 {
		t.Fatalf("%v allocations per cached topic", n)
	}
}
