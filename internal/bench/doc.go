// Package bench is the end-to-end benchmark of the gateway, `gateway bench`,
// and its counting subscriber, `gateway bench-subscriber`; cmd/gateway wires
// the two subcommands to Run and RunSubscriber.
//
// For each bridge under test Run starts, each in a process of its own and on
// loopback only:
//
//	simulation server (gateway sim: N Int32 counters changing every -rate)
//	  → bridge (gateway run -config …, or the gopcua baseline)
//	  → NATS (Debian's nats-server, or -nats)
//	  → counting subscriber (gateway bench-subscriber)
//
// waits until every item arrived and a warm-up passed, then measures a
// window of -duration: the subscriber's notifications, lost and duplicate
// counter values and latency (receive time − SourceTimestamp), and the CPU
// time (/proc/<pid>/stat) and RSS (/proc/<pid>/status) of every process. It
// prints one line per bridge and, with both, the CPU ratio. Every child is
// killed on the way out, on errors and interrupts too.
//
// The simulation server, the gateway and the subscriber are subcommands of
// one binary: by default the one running Run (os.Executable), else
// -gateway-bin. The baseline is the gopcua bridge of gopcuabridge/, built
// with the go tool unless -baseline-bin is given.
//
// The subscriber's scanner reads the messages' bytes without a JSON decoder
// and without allocating: it must keep up with millions of notifications per
// second on a core of its own, well below the bridge's cost.
package bench
