// Package sinktest is the conformance suite of the gateway's outputs: the
// behaviours every sink shares, run by each sink's package against its real
// broker (mosquitto, nats-server, the embedded brokers), its hub or its file
// through a Harness:
//
//	func TestConformance(t *testing.T) { sinktest.Run(t, harness()) }
//
// The suite checks delivery in order with every message settled exactly
// once, confirmation only after the broker's ack (at-least-once), close
// with and without a broker to drain to, the Sink contract's lifecycle, a
// broker going away and coming back (reconnection, drop-oldest, nothing
// lost at-least-once across a restart), refused credentials, TLS with
// client certificates and messages over the broker's size limit. A case
// runs only when the harness says the sink and its environment can do what
// it needs (Harness.Restart, Auth, TLS, …); what only one sink does (topic
// trees, retained messages and the will, NATS's credential kinds, the hub's
// selections) stays in that sink's own tests.
//
// It also holds what those tests share: Tracker (how messages settled),
// Message (a counter message), StartOutput (an Output set up for a test)
// and BenchOutput (the Output benchmark). Every case checks that the
// goroutines it started have ended (testutil.CheckLeaks), so the cases of
// one harness run one after the other.
//
// The package is imported only by tests (_test.go files).
package sinktest
