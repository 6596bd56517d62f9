package config

import "fmt"

// The delivery vocabulary of the sinks: what a sink promises (Guarantee) and
// what its full queue does (Policy). The names are the configuration's words
// (delivery.guarantee, delivery.policy); package sink and the sinks take
// these values from here, so that the words and their meaning live in one
// place. The zero values are the defaults (at-most-once, block).

// Guarantee is a sink's delivery guarantee.
type Guarantee string

const (
	// AtMostOnce: a message counts as delivered once it was handed to the
	// broker's client (or dropped by the queue policy); nothing is retried.
	AtMostOnce Guarantee = "at-most-once"
	// AtLeastOnce: a message counts as delivered only once the broker
	// confirmed it (MQTT PUBACK/PUBCOMP, JetStream ack); until then the OPC UA
	// notifications it carries are not acknowledged upstream.
	AtLeastOnce Guarantee = "at-least-once"
)

// ParseGuarantee parses "at-most-once" or "at-least-once"; "" is
// at-most-once.
func ParseGuarantee(s string) (Guarantee, error) {
	switch g := Guarantee(s); g {
	case "", AtMostOnce:
		return AtMostOnce, nil
	case AtLeastOnce:
		return g, nil
	}
	return "", fmt.Errorf("%q: want %s or %s", s, AtMostOnce, AtLeastOnce)
}

// String is the name; the zero value is at-most-once.
func (g Guarantee) String() string {
	if g == "" {
		return string(AtMostOnce)
	}
	return string(g)
}

// Policy is what a full sink queue does with the next message.
type Policy string

const (
	// Block makes the producer wait: the pipeline stops acknowledging, the
	// OPC UA client's MaxUnacked stops its Publish requests and the server's
	// queues hold the data.
	Block Policy = "block"
	// DropOldest drops the oldest queued message to make room (counted,
	// logged throttled); it never holds acknowledgements back.
	DropOldest Policy = "drop-oldest"
)

// ParsePolicy parses "block" or "drop-oldest"; "" is block.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case "", Block:
		return Block, nil
	case DropOldest:
		return p, nil
	}
	return "", fmt.Errorf("%q: want %s or %s", s, Block, DropOldest)
}

// String is the name; the zero value is block.
func (p Policy) String() string {
	if p == "" {
		return string(Block)
	}
	return string(p)
}
