package mqtt5sink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/uagate/gateway/bridge/sink"
)

// MQTT 5 PUBLISH properties the sink writes (MQTT 5.0 §3.3.2.3).
const (
	propPayloadFormat = 0x01
	propMessageExpiry = 0x02
	propContentType   = 0x03
	propUser          = 0x26
)

// ContentType is the Content Type of every message: Part 14 JSON
// (§7.3.5.9.2: application/json for uncompressed JSON), and the samples
// format, ua-status and per-field values are JSON too.
const ContentType = "application/json"

// SamplesSchema is the MessageSchema user property of a data message in
// OPC Publisher's legacy samples format: the name OPC Publisher gives that
// schema, which consumers migrating from it know.
const SamplesSchema = "application/x-monitored-item-json-v1"

// maxRemaining is the largest Remaining Length MQTT can encode.
const maxRemaining = 268_435_455

// errStringTooLong: a topic longer than an MQTT string can be.
var errStringTooLong = errors.New("longer than 65535 bytes, the most an MQTT string can hold")

// appendProperties appends the properties of a message of kind k for a
// (without their length): Payload Format Indicator 1 (UTF-8, the payload
// is JSON), Message Expiry Interval (expiry seconds, data messages only,
// when not 0), Content Type, and the user properties UAMessageType (Part 14
// §7.3.5.8 Table 180: ua-data, ua-metadata, ua-status; MessageSchema
// instead for samples), PublisherId, WriterGroup, DataSetWriter and Field
// where the message has them, and LeaseEpoch, under scale-out, the epoch
// of the lease holding that wrote it (epoch not 0): the MessageId of a
// Part 14 message carries it too, a per-field value has only this.
func appendProperties(b []byte, k sink.Kind, a *sink.Addr, samples bool, expiry uint32, epoch uint64) []byte {
	b = append(b, propPayloadFormat, 1)
	if expiry > 0 && k == sink.KindData {
		b = append(b, propMessageExpiry)
		b = binary.BigEndian.AppendUint32(b, expiry)
	}
	b = append(b, propContentType)
	b = appendString(b, ContentType)
	switch {
	case k == sink.KindData && samples:
		b = appendUser(b, "MessageSchema", SamplesSchema)
	case k == sink.KindData:
		b = appendUser(b, "UAMessageType", "ua-data")
	case k == sink.KindMetaData:
		b = appendUser(b, "UAMessageType", "ua-metadata")
	case k == sink.KindStatus:
		b = appendUser(b, "UAMessageType", "ua-status")
	}
	b = appendUser(b, "PublisherId", a.Publisher)
	if k == sink.KindStatus {
		return b
	}
	b = appendUser(b, "WriterGroup", a.Group)
	if a.Writer != "" {
		b = appendUser(b, "DataSetWriter", a.Writer)
	}
	if k == sink.KindField {
		b = appendUser(b, "Field", a.Field)
	}
	if epoch != 0 {
		var d [20]byte
		digits := strconv.AppendUint(d[:0], epoch, 10)
		b = append(b, propUser)
		b = appendString(b, "LeaseEpoch")
		b = binary.BigEndian.AppendUint16(b, uint16(len(digits)))
		b = append(b, digits...)
	}
	return b
}

// appendUser appends a User Property; an empty value is left out.
func appendUser(b []byte, key, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, propUser)
	b = appendString(b, key)
	return appendString(b, value)
}

// appendString appends s as an MQTT UTF-8 string, cut at 65535 bytes.
// What an MQTT receiver may refuse (MQTT 5.0 §1.5.4: invalid UTF-8, U+0000,
// control characters, non-characters) becomes '_': a broker that finds one
// ends the connection, and names come from the configuration.
func appendString(b []byte, s string) []byte {
	at := len(b)
	b = append(b, 0, 0)
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		b = append(b, s[:min(len(s), 65535)]...)
	} else {
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			if len(b)-at-2+max(n, 1) > 65535 {
				break
			}
			if !allowed(r, n) {
				b = append(b, '_')
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
		}
	}
	binary.BigEndian.PutUint16(b[at:], uint16(len(b)-at-2))
	return b
}

// allowed reports whether rune r (n bytes of UTF-8) may stand in an MQTT
// string.
func allowed(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n <= 1:
		return false
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return false
	case r&0xfffe == 0xfffe, r >= 0xfdd0 && r <= 0xfdef:
		return false
	}
	return true
}

// vbiLen is the length of n as a Variable Byte Integer.
func vbiLen(n int) int {
	switch {
	case n < 128:
		return 1
	case n < 16384:
		return 2
	case n < 2097152:
		return 3
	}
	return 4
}

func appendVBI(b []byte, n int) []byte {
	for {
		c := byte(n % 128)
		n /= 128
		if n > 0 {
			c |= 0x80
		}
		b = append(b, c)
		if n == 0 {
			return b
		}
	}
}

// publishSize is the size of a PUBLISH packet with a topic of topic
// bytes, props bytes of properties and a payload of payload bytes; it fails
// when MQTT cannot encode it.
func publishSize(topic int, qos byte, props, payload int) (int, error) {
	if topic > 65535 {
		return 0, fmt.Errorf("topic %w", errStringTooLong)
	}
	rem := 2 + topic + vbiLen(props) + props + payload
	if qos > 0 {
		rem += 2
	}
	if rem > maxRemaining {
		return 0, errPacketTooLarge
	}
	return 1 + vbiLen(rem) + rem, nil
}

// appendPublishHeader appends a PUBLISH packet up to its payload of payload
// bytes: the fixed header, the topic, the packet id (qos > 0) and the
// properties props. publishSize must have taken the sizes.
func appendPublishHeader(b []byte, topic string, qos byte, retain bool, id uint16, props []byte, payload int) []byte {
	rem := 2 + len(topic) + vbiLen(len(props)) + len(props) + payload
	if qos > 0 {
		rem += 2
	}
	flags := byte(0x30) | qos<<1
	if retain {
		flags |= 1
	}
	b = append(b, flags)
	b = appendVBI(b, rem)
	b = binary.BigEndian.AppendUint16(b, uint16(len(topic)))
	b = append(b, topic...)
	if qos > 0 {
		b = binary.BigEndian.AppendUint16(b, id)
	}
	b = appendVBI(b, len(props))
	return append(b, props...)
}

// errPacketTooLarge: beyond what MQTT can encode.
var errPacketTooLarge = errors.New("larger than an MQTT packet can be (256 MiB)")
