package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/api"
	"github.com/uagate/gateway/bridge"
	"github.com/uagate/gateway/bridge/config"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
)

// backend is an api.Backend over a configuration in memory, with fixed
// endpoint and sink states: what the commands read and change.
type backend struct {
	mu  sync.Mutex
	cfg *config.Config
}

func (b *backend) Config() *config.Config { b.mu.Lock(); defer b.mu.Unlock(); return b.cfg }

func (b *backend) ApplyConfig(ctx context.Context, change func(*config.Config) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, _ := json.Marshal(b.cfg)
	var next config.Config
	if err := json.Unmarshal(data, &next); err != nil {
		return err
	}
	if err := change(&next); err != nil {
		return err
	}
	b.cfg = &next
	return nil
}

func (b *backend) Endpoints() []api.EndpointStatus {
	st := api.NewEndpointStatus("plc1", "opc.tcp://plc1:4840", nil)
	st.LastError = "dial tcp: connection refused"
	st.Reconnects = 3
	return []api.EndpointStatus{st}
}
func (b *backend) LastValues(string, bridge.ValueFilter, int, int) ([]bridge.FieldValue, int, error) {
	return nil, -1, nil
}
func (b *backend) Metadata(g, w string) (*ua.DataSetMetaDataType, error) {
	return nil, fmt.Errorf("no metadata: %w", api.ErrUnavailable)
}
func (b *backend) Session(context.Context, string) (*client.Client, error) {
	return nil, fmt.Errorf("no sessions here: %w", api.ErrUnavailable)
}
func (b *backend) Store(string) (*pki.Store, error) {
	return nil, fmt.Errorf("none: %w", api.ErrNotFound)
}
func (b *backend) Stats() api.Stats {
	return api.Stats{Sinks: []api.SinkStats{{Kind: "mqtt", OutputStats: sink.OutputStats{Name: "broker", Connected: true, Sent: 12, Queued: 1}}},
		ScaleOut: &api.ScaleOutStatus{ReplicaID: "gw-0", Groups: []api.LeaseHolder{{Group: "line1", Holder: "gw-0", Local: true}, {Group: "line2"}}}}
}

const token = "cli-admin-token-0123456789"

func start(t *testing.T) (*backend, string) {
	t.Helper()
	b := &backend{cfg: &config.Config{
		Endpoints: []config.Endpoint{{Name: "plc1", URL: "opc.tcp://plc1:4840"}},
		WriterGroups: []config.WriterGroup{{Name: "line1", Endpoint: "plc1", Writers: []config.DataSetWriter{
			{Name: "motors", Fields: []config.Field{{Name: "speed", Node: "ns=1;s=Speed"}}}}}},
	}}
	s, err := api.New(api.Options{Backend: b, Version: "9.9.9", Keys: []api.Key{{Name: "cli", Token: token, Role: api.RoleAdmin}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return b, ts.URL
}

func TestStatus(t *testing.T) {
	_, url := start(t)
	var out strings.Builder
	if err := Status(t.Context(), url, token, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gateway 9.9.9", "NOT READY", "1 writer groups, 1 dataset writers, 1 fields",
		"plc1", "Disconnected", "dial tcp: connection refused", "broker", "true",
		"LEASE HOLDER (this replica: gw-0)", "gw-0 (here)", "nobody"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
	err := Status(t.Context(), url, "wrong-token-0123456789", io.Discard)
	var pe *ProblemError
	if !errors.As(err, &pe) || pe.Status != 401 || !strings.Contains(err.Error(), "the API key is not valid") {
		t.Fatalf("wrong token: %v", err)
	}
	if err := Status(t.Context(), "http://127.0.0.1:1", token, io.Discard); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("no gateway: %v", err)
	}
}

func TestNodes(t *testing.T) {
	b, url := start(t)
	ctx := t.Context()
	var out strings.Builder
	if err := NodesAdd(ctx, url, token, "line1", "motors", []string{"temp=ns=1;s=Temp", "i=2258"}, &out); err != nil {
		t.Fatal(err)
	}
	fs := b.Config().WriterGroups[0].Writers[0].Fields
	if len(fs) != 3 || fs[1].Name != "temp" || fs[1].Node != "ns=1;s=Temp" || fs[2].Name != "" || fs[2].Node != "i=2258" {
		t.Fatalf("fields %+v", fs)
	}
	// A new writer is created.
	if err := NodesAdd(ctx, url, token, "line1", "pumps", []string{"ns=1;s=Flow"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "created dataset writer line1/pumps") || len(b.Config().WriterGroups[0].Writers) != 2 {
		t.Fatalf("new writer: %s %+v", out.String(), b.Config().WriterGroups[0].Writers)
	}
	// A bad node id: the API's words, nothing added.
	err := NodesAdd(ctx, url, token, "line1", "motors", []string{"ns=1;s=Ok", "ns=q"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `node id "ns=q" is not valid`) || len(b.Config().WriterGroups[0].Writers[0].Fields) != 3 {
		t.Fatalf("bad node: %v", err)
	}
	out.Reset()
	if err := NodesList(ctx, url, token, "", "", &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"line1  motors  speed        ns=1;s=Speed", "line1  motors  temp         ns=1;s=Temp",
		"line1  motors  i=2258       i=2258", "line1  pumps   ns=1;s=Flow  ns=1;s=Flow"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("list: missing %q in\n%s", want, out.String())
		}
	}
	// Remove two at once (by name and by node); one missing removes none.
	if err := NodesRemove(ctx, url, token, "line1", "motors", []string{"temp", "ns=1;s=Nope"}, io.Discard); err == nil ||
		len(b.Config().WriterGroups[0].Writers[0].Fields) != 3 {
		t.Fatalf("remove with a missing one: %v", err)
	}
	if err := NodesRemove(ctx, url, token, "line1", "motors", []string{"temp", "i=2258"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if fs := b.Config().WriterGroups[0].Writers[0].Fields; len(fs) != 1 || fs[0].Name != "speed" {
		t.Fatalf("after remove %+v", fs)
	}
	if err := NodesRemove(ctx, url, token, "line1", "motors", []string{"speed"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	err = NodesList(ctx, url, token, "line9", "", io.Discard)
	var pe *ProblemError
	if !errors.As(err, &pe) || pe.Status != 404 {
		t.Fatalf("unknown group: %v", err)
	}
}

func TestParseFieldArg(t *testing.T) {
	for in, want := range map[string]api.Field{
		"ns=1;s=A":      {Node: "ns=1;s=A"},
		"i=85":          {Node: "i=85"},
		"speed=i=85":    {Name: "speed", Node: "i=85"},
		"t=ns=2;s=T":    {Name: "t", Node: "ns=2;s=T"},
		"nsu=urn:x;s=B": {Node: "nsu=urn:x;s=B"},
	} {
		if got := parseFieldArg(in); got.Name != want.Name || got.Node != want.Node {
			t.Errorf("%s: %+v", in, got)
		}
	}
}
