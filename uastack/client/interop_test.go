package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uagate/gateway/internal/testutil"
	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// The interop tests run the client against the node-opcua peer (testpeer/). It
// runs with small OperationLimits, so every test also exercises request splitting.

const (
	interopLimit = 10  // MaxNodesPerRead, …Browse, …Write, …MethodCall, …RegisterNodes, …Translate
	interopLarge = 300 // variables in Demo/Large
)

type interopEnv struct {
	peer  *nodeopcua.Server
	store *pki.Store
	eps   []ua.EndpointDescription
	user  testCert // an X.509 user
}

func startInterop(t *testing.T) *interopEnv {
	t.Helper()
	peer := nodeopcua.Start(t, nodeopcua.Options{
		LargeCount: interopLarge,
		Limits: nodeopcua.OperationLimits{
			MaxNodesPerRead: interopLimit, MaxNodesPerBrowse: interopLimit, MaxNodesPerWrite: interopLimit,
			MaxNodesPerMethodCall: interopLimit, MaxNodesPerRegisterNodes: interopLimit,
			MaxNodesPerTranslateBrowsePathsToNodeIds: interopLimit,
		},
	})
	store, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eps, err := GetEndpoints(ctx, peer.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) == 0 {
		t.Fatal("no endpoints")
	}
	if _, err := store.Trust(eps[0].ServerCertificate); err != nil {
		t.Fatal(err)
	}
	testCerts(t)
	return &interopEnv{peer: peer, store: store, eps: eps, user: userCrt}
}

func (e *interopEnv) dial(t testing.TB, cfg Config) (*Client, error) {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = e.store
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLog
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return Dial(ctx, e.peer.URL, &cfg)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestInterop connects with every policy × mode × token the peer offers and runs
// the services on its Demo folder; then the failure cases.
func TestInterop(t *testing.T) {
	env := startInterop(t)
	before := runtime.NumGoroutine()

	identities := []struct {
		name string
		id   Identity
	}{
		{"Anonymous", Anonymous()},
		{"UserName", UserName("user1", nodeopcua.Users["user1"])},
		{"X509", X509(env.user.der, env.user.key)},
	}
	policies := []string{uasc.SecurityPolicyNone, uasc.SecurityPolicyBasic256Sha256, uasc.SecurityPolicyAes128Sha256RsaOaep, uasc.SecurityPolicyAes256Sha256RsaPss}
	setpoint := 0.0
	for _, pu := range policies {
		pol, _ := uasc.PolicyByURI(pu)
		modes := []ua.MessageSecurityMode{ua.MessageSecurityModeSign, ua.MessageSecurityModeSignAndEncrypt}
		if pol.IsNone() {
			modes = []ua.MessageSecurityMode{ua.MessageSecurityModeNone}
		}
		for _, mode := range modes {
			for _, id := range identities {
				setpoint += 1.25
				sp := setpoint
				t.Run(pol.Name+"_"+modeName(mode)+"_"+id.name, func(t *testing.T) {
					c, err := env.dial(t, Config{SecurityPolicy: pu, SecurityMode: mode, Identity: id.id})
					if err != nil {
						t.Fatal(err)
					}
					defer func() {
						if err := c.Close(); err != nil {
							t.Errorf("Close: %v", err)
						}
					}()
					if c.SecurityPolicy().URI != pu || c.SecurityMode() != mode {
						t.Fatalf("connected with %s/%v", c.SecurityPolicy().Name, c.SecurityMode())
					}
					demoServices(t, c, sp)
				})
			}
		}
	}

	t.Run("BestAvailable", func(t *testing.T) {
		c, err := env.dial(t, Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// The peer rates Aes256_Sha256_RsaPss/SignAndEncrypt highest.
		if c.SecurityPolicy().URI != uasc.SecurityPolicyAes256Sha256RsaPss || c.SecurityMode() != ua.MessageSecurityModeSignAndEncrypt {
			t.Fatalf("best available is %s/%v", c.SecurityPolicy().Name, c.SecurityMode())
		}
		if lim := c.OperationLimits(); lim.MaxNodesPerRead != interopLimit || lim.MaxNodesPerBrowse != interopLimit {
			t.Fatalf("limits %+v", lim)
		}
		if ns := c.Namespaces(); len(ns) < 2 || ns[0] != "http://opcfoundation.org/UA/" {
			t.Fatalf("namespaces %v", ns)
		}
	})

	t.Run("WrongPassword", func(t *testing.T) {
		for _, pu := range []string{uasc.SecurityPolicyNone, uasc.SecurityPolicyBasic256Sha256} {
			_, err := env.dial(t, Config{SecurityPolicy: pu, Identity: UserName("user1", "wrong")})
			if !errors.Is(err, ua.StatusBadUserAccessDenied) {
				t.Fatalf("%s: got %v, want BadUserAccessDenied", pu, err)
			}
			if strings.Contains(err.Error(), "wrong") {
				t.Fatalf("the error shows the password: %v", err)
			}
		}
	})

	t.Run("UntrustedServerCertificate", func(t *testing.T) {
		store, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Store: store, SecurityPolicy: "Basic256Sha256"}
		_, err = env.dial(t, cfg)
		var ue *pki.UntrustedError
		if !errors.As(err, &ue) || !errors.Is(err, pki.ErrUntrusted) {
			t.Fatalf("got %v, want a *pki.UntrustedError", err)
		}
		if filepath.Dir(ue.Path) != store.Path(pki.FolderRejected) || !strings.Contains(err.Error(), ue.Path) {
			t.Fatalf("rejected copy %q not in %s, or not named in %q", ue.Path, store.Path(pki.FolderRejected), err)
		}
		if _, err := os.Stat(ue.Path); err != nil {
			t.Fatal(err)
		}
		// What an operator does: move the file to trusted/.
		if err := os.Rename(ue.Path, filepath.Join(store.Path(pki.FolderTrusted), filepath.Base(ue.Path))); err != nil {
			t.Fatal(err)
		}
		c, err := env.dial(t, cfg)
		if err != nil {
			t.Fatalf("after trusting: %v", err)
		}
		c.Close()
	})

	t.Run("AutoAccept", func(t *testing.T) {
		store, err := pki.Open(t.TempDir(), pki.Options{Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		c, err := env.dial(t, Config{Store: store, AutoAccept: true})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		trusted, _ := store.List(pki.FolderTrusted)
		rejected, _ := store.List(pki.FolderRejected)
		if len(trusted) != 1 || len(rejected) != 0 {
			t.Fatalf("trusted %d, rejected %d; want 1, 0", len(trusted), len(rejected))
		}
	})

	t.Run("OperationLimits", func(t *testing.T) { operationLimits(t, env) })

	t.Run("NoGoroutineLeak", func(t *testing.T) {
		for range 3 {
			c, err := env.dial(t, Config{SecurityPolicy: "Basic256Sha256"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.ReadValues(ctxT(t), ua.MustParseNodeID(nodeopcua.NodeCounter)); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-c.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("Done not closed after Close")
			}
		}
		// before was counted in TestInterop's goroutine; this subtest runs in one
		// more. Everything the matrix above started must be gone too.
		before++
		testutil.WaitGoroutines(t, before)
	})
}

// demoServices browses the Demo folder, reads Counter, writes Setpoint and reads
// it back, and calls Add.
func demoServices(t *testing.T, c *Client, setpoint float64) {
	t.Helper()
	ctx := ctxT(t)
	demo := ua.MustParseNodeID(nodeopcua.NodeDemo)
	res, err := c.BrowseChildren(ctx, demo)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range res[0].References {
		names = append(names, r.BrowseName.Name)
	}
	for _, want := range []string{"Counter", "Setpoint", "Add", "Large", "DoubleArray"} {
		if !slices.Contains(names, want) {
			t.Fatalf("Demo has %v, no %s", names, want)
		}
	}

	vals, err := c.ReadValues(ctx, ua.MustParseNodeID(nodeopcua.NodeCounter), ua.MustParseNodeID(nodeopcua.NodeDoubleArray))
	if err != nil {
		t.Fatal(err)
	}
	if vals[0].Status.IsBad() || vals[0].Value.Type() != ua.TypeDouble || vals[0].SourceTimestamp.IsNull() {
		t.Fatalf("Counter: %+v", vals[0])
	}
	if arr, ok := vals[1].Value.Value().([]float64); !ok || !slices.Equal(arr, []float64{1.5, 2.5, 3.5, 4.5}) {
		t.Fatalf("DoubleArray: %v", vals[1].Value)
	}

	sp := ua.MustParseNodeID(nodeopcua.NodeSetpoint)
	if err := c.WriteValue(ctx, sp, ua.NewDoubleVariant(setpoint)); err != nil {
		t.Fatal(err)
	}
	vals, err = c.ReadValues(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	if got := vals[0].Value.Double(); got != setpoint {
		t.Fatalf("Setpoint reads %v after writing %v", got, setpoint)
	}

	out, err := c.CallMethod(ctx, demo, ua.MustParseNodeID(nodeopcua.NodeAdd), ua.NewDoubleVariant(2.5), ua.NewDoubleVariant(setpoint))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Double() != 2.5+setpoint {
		t.Fatalf("Add(2.5, %v) = %v", setpoint, out)
	}
}

// operationLimits reads, browses, writes, calls, translates and registers 250
// operations at a peer that takes 10 at a time, and checks the results are in
// request order.
func operationLimits(t *testing.T, env *interopEnv) {
	c, err := env.dial(t, Config{SecurityPolicy: "None"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t)
	const n = 250

	// The peer really refuses more than its limit.
	raw := &ua.ReadRequest{}
	for i := range interopLimit + 1 {
		raw.NodesToRead = append(raw.NodesToRead, ua.ReadValueID{NodeID: ua.MustParseNodeID(nodeopcua.LargeNode(i)), AttributeID: AttributeValue})
	}
	if _, err := c.Send(ctx, raw, &ua.ReadResponse{}); !errors.Is(err, ua.StatusBadTooManyOperations) {
		t.Fatalf("a raw Read of %d nodes: %v, want BadTooManyOperations", interopLimit+1, err)
	}

	ids := make([]ua.NodeID, n)
	for i := range ids {
		ids[i] = ua.MustParseNodeID(nodeopcua.LargeNode(i))
	}
	vals, err := c.ReadValues(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if v.Status.IsBad() || v.Value.Int32() != int32(i) {
			t.Fatalf("value %d: %v %v", i, v.Status, v.Value)
		}
	}

	// Browse 250 nodes (each a variable: its HasTypeDefinition) …
	breq := &ua.BrowseRequest{}
	for _, id := range ids {
		breq.NodesToBrowse = append(breq.NodesToBrowse, ua.BrowseDescription{
			NodeID: id, BrowseDirection: ua.BrowseDirectionInverse, ReferenceTypeID: ua.NewNumericNodeID(0, ua.ID_HierarchicalReferences),
			IncludeSubtypes: true, ResultMask: uint32(ua.BrowseResultMaskAll),
		})
	}
	bres, err := c.Browse(ctx, breq)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range bres.Results {
		if r.StatusCode.IsBad() || len(r.References) != 1 || r.References[0].NodeID.NodeID.String() != nodeopcua.NodeLarge {
			t.Fatalf("browse %d (%s): %v %+v", i, ids[i], r.StatusCode, r.References)
		}
	}
	// … and the folder of 300 at 25 references per result: 11 continuation points.
	lres, err := c.Browse(ctx, &ua.BrowseRequest{
		RequestedMaxReferencesPerNode: 25,
		NodesToBrowse: []ua.BrowseDescription{{
			NodeID: ua.MustParseNodeID(nodeopcua.NodeLarge), BrowseDirection: ua.BrowseDirectionForward,
			ReferenceTypeID: ua.NewNumericNodeID(0, ua.ID_Organizes), IncludeSubtypes: true, ResultMask: uint32(ua.BrowseResultMaskAll),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	refs := lres.Results[0].References
	if len(refs) != interopLarge {
		t.Fatalf("Large has %d references, want %d", len(refs), interopLarge)
	}
	for i, r := range refs {
		if want := fmt.Sprintf("V%05d", i); r.BrowseName.Name != want {
			t.Fatalf("reference %d is %s, want %s", i, r.BrowseName.Name, want)
		}
	}

	// Write 250 Setpoints (the same node): every result Good.
	wreq := &ua.WriteRequest{}
	for i := range n {
		wreq.NodesToWrite = append(wreq.NodesToWrite, ua.WriteValue{NodeID: ua.MustParseNodeID(nodeopcua.NodeSetpoint), AttributeID: AttributeValue,
			Value: ua.DataValue{Value: ua.NewDoubleVariant(float64(i))}})
	}
	wres, err := c.Write(ctx, wreq)
	if err != nil {
		t.Fatal(err)
	}
	if len(wres.Results) != n || slices.ContainsFunc(wres.Results, ua.StatusCode.IsBad) {
		t.Fatalf("write results %v", wres.Results)
	}
	if v, _ := c.ReadValues(ctx, ua.MustParseNodeID(nodeopcua.NodeSetpoint)); v[0].Value.Double() != n-1 {
		t.Fatalf("Setpoint %v after the writes, want %d (the last)", v[0].Value, n-1)
	}

	// Call Add 250 times.
	creq := &ua.CallRequest{}
	for i := range n {
		creq.MethodsToCall = append(creq.MethodsToCall, ua.CallMethodRequest{ObjectID: ua.MustParseNodeID(nodeopcua.NodeDemo),
			MethodID: ua.MustParseNodeID(nodeopcua.NodeAdd), InputArguments: []ua.Variant{ua.NewDoubleVariant(float64(i)), ua.NewDoubleVariant(0.5)}})
	}
	cres, err := c.Call(ctx, creq)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range cres.Results {
		if r.StatusCode.IsBad() || len(r.OutputArguments) != 1 || r.OutputArguments[0].Double() != float64(i)+0.5 {
			t.Fatalf("call %d: %v %v", i, r.StatusCode, r.OutputArguments)
		}
	}

	// Translate Objects/1:Demo/1:Large/1:Vxxxxx and register the results.
	treq := &ua.TranslateBrowsePathsToNodeIDsRequest{}
	elem := func(name string) ua.RelativePathElement {
		return ua.RelativePathElement{ReferenceTypeID: ua.NewNumericNodeID(0, ua.ID_HierarchicalReferences), IncludeSubtypes: true, TargetName: ua.NewQualifiedName(1, name)}
	}
	for i := range n {
		treq.BrowsePaths = append(treq.BrowsePaths, ua.BrowsePath{StartingNode: ua.NewNumericNodeID(0, ua.ID_ObjectsFolder),
			RelativePath: ua.RelativePath{Elements: []ua.RelativePathElement{elem("Demo"), elem("Large"), elem(fmt.Sprintf("V%05d", i))}}})
	}
	tres, err := c.TranslateBrowsePathsToNodeIDs(ctx, treq)
	if err != nil {
		t.Fatal(err)
	}
	reg := &ua.RegisterNodesRequest{}
	for i, r := range tres.Results {
		if r.StatusCode.IsBad() || len(r.Targets) != 1 || r.Targets[0].TargetID.NodeID != ids[i] {
			t.Fatalf("translate %d: %v %+v", i, r.StatusCode, r.Targets)
		}
		reg.NodesToRegister = append(reg.NodesToRegister, r.Targets[0].TargetID.NodeID)
	}
	rres, err := c.RegisterNodes(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rres.RegisteredNodeIDs) != n {
		t.Fatalf("%d registered", len(rres.RegisteredNodeIDs))
	}
	rvals, err := c.ReadValues(ctx, rres.RegisteredNodeIDs...)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range rvals {
		if v.Value.Int32() != int32(i) {
			t.Fatalf("registered node %d reads %v", i, v.Value)
		}
	}
	if _, err := c.UnregisterNodes(ctx, &ua.UnregisterNodesRequest{NodesToUnregister: rres.RegisteredNodeIDs}); err != nil {
		t.Fatal(err)
	}
}
