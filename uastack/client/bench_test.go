package client

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/uagate/gateway/testpeer/nodeopcua"
	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/server"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/uagate/gateway/uastack/uasc"
)

// Benchmarks mirroring the .NET stack's SecurityPolicyBenchmarks: the client
// against the node-opcua peer on loopback, per security policy (SignAndEncrypt,
// None for None). Endpoints are discovered once outside the loop, as an
// application that caches them would; the application certificate is loaded
// once; the server certificate is validated against the store on every connect,
// as Dial always does. Besides time and allocations they report cpu-ns/op, the
// CPU time of the client process per operation: on a busy machine the wall time
// is mostly the peer's (node-opcua), this is ours. Results: BENCHMARKS.md.
//
// UAGATE_BENCH_PEER=sim runs them against the simulation server (uastack/server)
// in a child process instead, reading its Load variables.

var benchPolicies = []string{
	uasc.SecurityPolicyNone,
	uasc.SecurityPolicyBasic256Sha256,
	uasc.SecurityPolicyAes128Sha256RsaOaep,
	uasc.SecurityPolicyAes256Sha256RsaPss,
}

type benchEnv struct {
	url  string
	cfg  Config             // everything but the policy and mode
	node func(i int) string // the i-th of 200 readable Int32 variables
	sim  bool
}

func startBench(b *testing.B) *benchEnv {
	b.Helper()
	env := &benchEnv{}
	if os.Getenv("UAGATE_BENCH_PEER") == "sim" {
		env.sim = true
		env.url = startSimProcess(b, simOptions{Folders: 1, Variables: 200, Types: []ua.TypeID{ua.TypeInt32}, AllPolicies: true})
		env.node = func(i int) string { return server.LoadNode(0, i) }
	} else {
		env.url = nodeopcua.Start(b, nodeopcua.Options{LargeCount: 200}).URL
		env.node = nodeopcua.LargeNode
	}
	store, err := pki.Open(b.TempDir(), pki.Options{Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eps, err := GetEndpoints(ctx, env.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := store.Trust(eps[0].ServerCertificate); err != nil {
		b.Fatal(err)
	}
	_, der, key, err := store.LoadOrCreateOwn(DefaultApplicationURI(), nil)
	if err != nil {
		b.Fatal(err)
	}
	env.cfg = Config{Store: store, Endpoints: eps, Certificate: der, PrivateKey: key, Logger: quietLog}
	return env
}

func (e *benchEnv) config(policy string) *Config {
	cfg := e.cfg
	cfg.SecurityPolicy = policy
	if policy == uasc.SecurityPolicyNone {
		cfg.SecurityMode = ua.MessageSecurityModeNone
	} else {
		cfg.SecurityMode = ua.MessageSecurityModeSignAndEncrypt
	}
	return &cfg
}

// cpuMeter reports the client process's CPU time per operation as cpu-ns/op.
type cpuMeter struct{ start time.Duration }

func startCPU() cpuMeter { return cpuMeter{processCPU()} }

func (m cpuMeter) report(b *testing.B) {
	if b.N > 0 && m.start > 0 {
		b.ReportMetric(float64(processCPU()-m.start)/float64(b.N), "cpu-ns/op")
	}
}

func policyShortName(uri string) string {
	p, _ := uasc.PolicyByURI(uri)
	return p.Name
}

func (e *benchEnv) largeRead(n int) *ua.ReadRequest {
	req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnBoth}
	for i := range n {
		req.NodesToRead = append(req.NodesToRead, ua.ReadValueID{NodeID: ua.MustParseNodeID(e.node(i)), AttributeID: AttributeValue})
	}
	return req
}

// BenchmarkConnectClose: open channel, create and activate the session (and the
// OperationLimits read that Dial does), close session and channel.
func BenchmarkConnectClose(b *testing.B) {
	env := startBench(b)
	for _, pol := range benchPolicies {
		b.Run(policyShortName(pol), func(b *testing.B) {
			cfg := env.config(pol)
			ctx := context.Background()
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				c, err := Dial(ctx, env.url, cfg)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
		})
	}
}

// BenchmarkSessionLifecycleRead10: connect, create and activate, read 10 nodes,
// close.
func BenchmarkSessionLifecycleRead10(b *testing.B) {
	env := startBench(b)
	for _, pol := range benchPolicies {
		b.Run(policyShortName(pol), func(b *testing.B) {
			cfg := env.config(pol)
			ctx := context.Background()
			req := env.largeRead(10)
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				c, err := Dial(ctx, env.url, cfg)
				if err != nil {
					b.Fatal(err)
				}
				resp, err := c.Read(ctx, req)
				if err != nil || len(resp.Results) != 10 {
					b.Fatal(err)
				}
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
		})
	}
}

// BenchmarkRead: one session, Read of 10, 50 and 200 nodes into a reused
// response.
func BenchmarkRead(b *testing.B) {
	env := startBench(b)
	for _, pol := range benchPolicies {
		b.Run(policyShortName(pol), func(b *testing.B) {
			c, err := Dial(context.Background(), env.url, env.config(pol))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			for _, n := range []int{10, 50, 200} {
				b.Run(strconv.Itoa(n), func(b *testing.B) {
					ctx := context.Background()
					req := env.largeRead(n)
					var resp ua.ReadResponse
					b.ReportAllocs()
					cpu := startCPU()
					for b.Loop() {
						if err := c.ReadInto(ctx, req, &resp); err != nil {
							b.Fatal(err)
						}
					}
					cpu.report(b)
					last := resp.Results[n-1]
					if last.Status.IsBad() || last.Value.Type() != ua.TypeInt32 || (!env.sim && last.Value.Int32() != int32(n-1)) {
						b.Fatalf("last value %v %v", last.Value, last.Status)
					}
				})
			}
		})
	}
}

// BenchmarkGetEndpoints: endpoint discovery alone (its own None channel).
func BenchmarkGetEndpoints(b *testing.B) {
	env := startBench(b)
	ctx := context.Background()
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if _, err := GetEndpoints(ctx, env.url, nil); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}
