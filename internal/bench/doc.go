// Package bench is the end-to-end benchmark of the gateway, `gateway bench`,
// and its counting subscriber, `gateway bench-subscriber`; cmd/gateway wires
// the two subcommands to Run and RunSubscriber.
//
// For each bridge under test Run starts, each in a process of its own and on
// loopback only:
//
//	upstream server (gateway sim: N Int32 counters changing every -rate;
//	                 or node-opcua's test peer with -upstream nodeopcua)
//	  → bridge (gateway run -config …, or the gopcua baseline)
//	  → NATS (Debian's nats-server, or -nats)
//	  → counting subscriber (gateway bench-subscriber)
//
// waits until every item arrived and a warm-up passed, then measures a
// window of -duration: the subscriber's notifications, lost and duplicate
// counter values and latency (receive time − SourceTimestamp); the CPU
// time, context switches (/proc/<pid>/stat, task/*/status) and RSS of every
// process; the machine's busy CPU (/proc/stat); and the gateway's own
// counters and allocations from its /metrics. It prints one line of
// figures per bridge and a verdict (result.go): sustained, or not, and then
// whether the evidence names the bridge, the harness (a subscriber or NATS
// that fell behind, a busy server) or the machine (every core busy) as the
// limit. With both bridges it prints the CPU ratio, labelled when a bridge
// did not sustain the rate. -find-max steps the rate up until the gateway
// does not sustain it; -idle measures it at rest. Every child is killed on
// the way out, on errors and interrupts too.
//
// The simulation server, the gateway and the subscriber are subcommands of
// one binary: by default the one running Run (os.Executable), else
// -gateway-bin. The baseline is the gopcua bridge of gopcuabridge/, built
// with the go tool unless -baseline-bin is given.
//
// The subscriber must cost far less than the bridge, so that the harness
// fits beside it on two cores: its NATS client (natsread.go) reads each
// payload into a recycled buffer and hands it to the parser with its
// receive time, and the scanner reads the messages' bytes without a JSON
// decoder and without allocating, with a fast path for the gateway's
// DataValue fields.
package bench
