package nodeopcua

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"
)

// connect opens a gopcua session to the peer over security None. For a UserName
// token the endpoint's token policy (node-opcua encrypts passwords even on a None
// channel) comes from GetEndpoints.
func connect(t *testing.T, ctx context.Context, url string, auth ...opcua.Option) (*opcua.Client, error) {
	t.Helper()
	opts := []opcua.Option{
		opcua.SecurityMode(ua.MessageSecurityModeNone),
		opcua.SecurityPolicy(ua.SecurityPolicyURINone),
		opcua.DialTimeout(10 * time.Second),
		opcua.RequestTimeout(10 * time.Second),
		opcua.AutoReconnect(false),
	}
	opts = append(opts, auth...)
	c, err := opcua.NewClient(url, opts...)
	if err != nil {
		return nil, err
	}
	if err := c.Connect(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func readDouble(t *testing.T, ctx context.Context, c *opcua.Client, node string) float64 {
	t.Helper()
	resp, err := c.Read(ctx, &ua.ReadRequest{
		NodesToRead:        []*ua.ReadValueID{{NodeID: ua.MustParseNodeID(node), AttributeID: ua.AttributeIDValue}},
		TimestampsToReturn: ua.TimestampsToReturnBoth,
	})
	if err != nil {
		t.Fatalf("read %s: %v", node, err)
	}
	if len(resp.Results) != 1 || resp.Results[0].Status != ua.StatusOK {
		t.Fatalf("read %s: results %+v", node, resp.Results)
	}
	v, ok := resp.Results[0].Value.Value().(float64)
	if !ok {
		t.Fatalf("read %s: value %#v is not a Double", node, resp.Results[0].Value.Value())
	}
	return v
}

// waitCounterAbove polls the Counter until it passes prev, within a deadline.
func waitCounterAbove(t *testing.T, ctx context.Context, c *opcua.Client, prev float64) float64 {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		if v := readDouble(t, ctx, c, NodeCounter); v > prev {
			return v
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("Counter did not pass %v within 10 s", prev)
		}
	}
}

// TestPeerWithGopcua proves the peer works with an independent client: the Counter
// increments, the scalars read back, the method adds, the Setpoint is writable, user
// tokens are checked, and the server comes back on the same URL after Restart.
func TestPeerWithGopcua(t *testing.T) {
	srv := Start(t, Options{LargeCount: 10, Limits: OperationLimits{MaxNodesPerRead: 7}})
	if want := fmt.Sprintf("opc.tcp://127.0.0.1:%d%s", srv.Port, ResourcePath); srv.URL != want {
		t.Fatalf("URL = %q, want %q", srv.URL, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	c, err := connect(t, ctx, srv.URL)
	if err != nil {
		t.Fatalf("connect anonymous: %v", err)
	}
	defer c.Close(ctx)

	first := readDouble(t, ctx, c, NodeCounter)
	second := waitCounterAbove(t, ctx, c, first)
	t.Logf("Counter %v -> %v", first, second)

	t.Run("scalars", func(t *testing.T) {
		resp, err := c.Read(ctx, &ua.ReadRequest{NodesToRead: []*ua.ReadValueID{
			{NodeID: ua.MustParseNodeID(NodeInt32), AttributeID: ua.AttributeIDValue},
			{NodeID: ua.MustParseNodeID(NodeString), AttributeID: ua.AttributeIDValue},
			{NodeID: ua.MustParseNodeID(NodeBoolean), AttributeID: ua.AttributeIDValue},
			{NodeID: ua.MustParseNodeID(NodeDoubleArray), AttributeID: ua.AttributeIDValue},
			{NodeID: ua.MustParseNodeID(LargeNode(9)), AttributeID: ua.AttributeIDValue},
		}})
		if err != nil {
			t.Fatal(err)
		}
		want := []any{int32(-42), "Hello, gateway", true, []float64{1.5, 2.5, 3.5, 4.5}, int32(9)}
		for i, r := range resp.Results {
			if r.Status != ua.StatusOK || fmt.Sprint(r.Value.Value()) != fmt.Sprint(want[i]) {
				t.Errorf("result %d: %v %#v, want %#v", i, r.Status, r.Value.Value(), want[i])
			}
		}
	})

	t.Run("operation limit", func(t *testing.T) {
		nodes := make([]*ua.ReadValueID, 8) // one more than MaxNodesPerRead
		for i := range nodes {
			nodes[i] = &ua.ReadValueID{NodeID: ua.MustParseNodeID(LargeNode(i)), AttributeID: ua.AttributeIDValue}
		}
		_, err := c.Read(ctx, &ua.ReadRequest{NodesToRead: nodes})
		if !errors.Is(err, ua.StatusBadTooManyOperations) {
			t.Fatalf("read of 8 nodes with MaxNodesPerRead=7: err = %v, want BadTooManyOperations", err)
		}
	})

	t.Run("method", func(t *testing.T) {
		res, err := c.Call(ctx, &ua.CallMethodRequest{
			ObjectID:       ua.MustParseNodeID(NodeDemo),
			MethodID:       ua.MustParseNodeID(NodeAdd),
			InputArguments: []*ua.Variant{ua.MustVariant(2.5), ua.MustVariant(4.0)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != ua.StatusOK || len(res.OutputArguments) != 1 || res.OutputArguments[0].Value() != 6.5 {
			t.Fatalf("Add(2.5, 4) = %v %v", res.StatusCode, res.OutputArguments)
		}
	})

	t.Run("setpoint", func(t *testing.T) {
		v := &ua.DataValue{EncodingMask: ua.DataValueValue, Value: ua.MustVariant(42.25)}
		resp, err := c.Write(ctx, &ua.WriteRequest{NodesToWrite: []*ua.WriteValue{{
			NodeID: ua.MustParseNodeID(NodeSetpoint), AttributeID: ua.AttributeIDValue, Value: v,
		}}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Results[0] != ua.StatusOK {
			t.Fatalf("write Setpoint: %v", resp.Results[0])
		}
		if got := readDouble(t, ctx, c, NodeSetpoint); got != 42.25 {
			t.Fatalf("Setpoint = %v after writing 42.25", got)
		}
	})

	t.Run("users", func(t *testing.T) {
		eps, err := opcua.GetEndpoints(ctx, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		var none *ua.EndpointDescription
		var got []string
		for _, ep := range eps {
			if ep.SecurityMode == ua.MessageSecurityModeNone {
				none = ep
			}
			got = append(got, strings.TrimPrefix(ep.SecurityPolicyURI, "http://opcfoundation.org/UA/SecurityPolicy#")+"/"+ep.SecurityMode.String())
		}
		slices.Sort(got)
		want := []string{
			"Aes128_Sha256_RsaOaep/MessageSecurityModeSign", "Aes128_Sha256_RsaOaep/MessageSecurityModeSignAndEncrypt",
			"Aes256_Sha256_RsaPss/MessageSecurityModeSign", "Aes256_Sha256_RsaPss/MessageSecurityModeSignAndEncrypt",
			"Basic256Sha256/MessageSecurityModeSign", "Basic256Sha256/MessageSecurityModeSignAndEncrypt",
			"None/MessageSecurityModeNone",
		}
		if !slices.Equal(got, want) {
			t.Errorf("endpoints:\n got %q\nwant %q", got, want)
		}
		if none == nil {
			t.Fatal("no None endpoint")
		}
		var tokens []ua.UserTokenType
		for _, p := range none.UserIdentityTokens {
			tokens = append(tokens, p.TokenType)
		}
		for _, tt := range []ua.UserTokenType{ua.UserTokenTypeAnonymous, ua.UserTokenTypeUserName, ua.UserTokenTypeCertificate} {
			if !slices.Contains(tokens, tt) {
				t.Errorf("user token types %v lack %v", tokens, tt)
			}
		}
		withUser := func(user, pass string) []opcua.Option {
			return []opcua.Option{
				opcua.SecurityFromEndpoint(none, ua.UserTokenTypeUserName),
				opcua.AuthUsername(user, pass),
			}
		}
		good, err := connect(t, ctx, srv.URL, withUser("user1", Users["user1"])...)
		if err != nil {
			t.Fatalf("user1 with the right password: %v", err)
		}
		good.Close(ctx)
		bad, err := connect(t, ctx, srv.URL, withUser("user1", "wrong")...)
		if err == nil {
			bad.Close(ctx)
			t.Fatal("user1 with a wrong password was accepted")
		}
		if !errors.Is(err, ua.StatusBadUserAccessDenied) {
			t.Fatalf("wrong password: err = %v, want BadUserAccessDenied", err)
		}
	})

	t.Run("restart", func(t *testing.T) {
		c.Close(ctx)
		url := srv.URL
		srv.Restart()
		if srv.URL != url {
			t.Fatalf("URL changed across Restart: %q -> %q", url, srv.URL)
		}
		c2, err := connect(t, ctx, srv.URL)
		if err != nil {
			t.Fatalf("connect after restart: %v", err)
		}
		defer c2.Close(ctx)
		readDouble(t, ctx, c2, NodeCounter)
	})
}

// fatalTB records Fatalf instead of failing the real test, and ends the goroutine
// the way testing.T.Fatalf does.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fatalTB) Skip(...any)           { panic("Skip called") }
func (f *fatalTB) Skipf(string, ...any)  { panic("Skipf called") }
func (f *fatalTB) SkipNow()              { panic("SkipNow called") }
func (f *fatalTB) Cleanup(fn func())     { f.TB.Cleanup(fn) }
func (f *fatalTB) TempDir() string       { return f.TB.TempDir() }
func (f *fatalTB) Logf(string, ...any)   {}
func (f *fatalTB) Errorf(string, ...any) {}

// TestStartFailsWhenNotInstalled checks that a missing node_modules fails the test
// with the install hint instead of skipping it.
func TestStartFailsWhenNotInstalled(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "server.mjs"), []byte("// empty\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("UAGATE_TESTPEER_DIR", dir)
	if err := Installed(); err == nil {
		t.Fatal("Installed() = nil without node_modules")
	}
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(f, Options{})
	}()
	<-done
	if !strings.Contains(f.msg, "node-opcua not installed: run scripts/install-node-opcua.sh") {
		t.Fatalf("Fatalf message = %q", f.msg)
	}
}
