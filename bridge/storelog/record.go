package storelog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/uagate/gateway/bridge/sink"
)

// A record is a message as the log keeps it: a fixed header, the writer and
// field names of its Addr, then the payload. It is stored in parts of at
// most partSize bytes under the keys (sequence number, part): a value that
// fits a page is written from bbolt's page pool, where a larger one makes
// it allocate its pages at every commit (the garbage of a log of 100 KiB
// messages was 1.5 bytes per byte logged; BENCHMARKS.md). Little-endian:
//
//	0  version   1 byte (recordVersion)
//	1  kind      1 byte (sink.Kind)
//	2  flags     1 byte (flagRetained)
//	3  reserved  1 byte
//	4  created   int64: Message.Created (UnixNano of the encoding)
//	12 appended  int64: UnixNano of the append (MaxAge, backlog age)
//	20 cum       uint64: the stream's payload bytes before this record
//	28 writer    uint16 length, then field uint16 length
//	32 total     uint32: the record's length, header included
//	36 writer name, field name, payload
//
// The stream (the writer group) and the publisher are the log's, not the
// record's.

const (
	recordVersion = 1
	headerSize    = 36
	flagRetained  = 1
	// pageSize is the file's page size and partSize the largest part of a
	// record. bbolt splits a leaf larger than a page into leaves of at
	// most fillPercent of a page: filled whole, a leaf of the records
	// appended in order holds four parts of 7.5 KiB or more of smaller
	// ones (a fifth does not fit: never a page of several, which bbolt
	// allocates at every commit). Three quarters, as before, left the
	// leaves of 12 KiB records 60 % full, and the log wrote 2.7 bytes per
	// byte logged (BenchmarkLogResponse's written-B/op) where it now
	// writes 1.2, with pages trimmed as well (pagewrite.go).
	pageSize    = 32 << 10
	partSize    = 7680
	fillPercent = 1.0
)

// errRecord is wrapped by a record that cannot be decoded.
var errRecord = errors.New("storelog: malformed record")

// recordHeader is a decoded header; the names and the payload are slices of
// the record.
type recordHeader struct {
	kind     sink.Kind
	retained bool
	created  int64
	appended int64
	cum      uint64
	writer   []byte
	field    []byte
	payload  []byte
}

// recordSize is the size of m's record.
func recordSize(m *sink.Message) int {
	return headerSize + len(m.Addr.Writer) + len(m.Addr.Field) + m.Len()
}

// appendHeader appends the header and names of m's record, appended at now
// after cum payload bytes of its stream, to b: the payload follows them.
func appendHeader(b []byte, m *sink.Message, now int64, cum uint64) []byte {
	var h [headerSize]byte
	h[0] = recordVersion
	h[1] = byte(m.Kind)
	if m.Retained {
		h[2] = flagRetained
	}
	binary.LittleEndian.PutUint64(h[4:], uint64(m.Created))
	binary.LittleEndian.PutUint64(h[12:], uint64(now))
	binary.LittleEndian.PutUint64(h[20:], cum)
	binary.LittleEndian.PutUint16(h[28:], uint16(len(m.Addr.Writer)))
	binary.LittleEndian.PutUint16(h[30:], uint16(len(m.Addr.Field)))
	binary.LittleEndian.PutUint32(h[32:], uint32(recordSize(m)))
	b = append(b, h[:]...)
	b = append(b, m.Addr.Writer...)
	return append(b, m.Addr.Field...)
}

// recordTotal returns the length of the record whose first part is b.
func recordTotal(b []byte) (int, error) {
	if len(b) < headerSize || b[0] != recordVersion {
		return 0, fmt.Errorf("%w: %d bytes, version %d", errRecord, len(b), firstByte(b))
	}
	return int(binary.LittleEndian.Uint32(b[32:])), nil
}

// recordAppended returns the append time of the record whose first part is
// b.
func recordAppended(b []byte) (int64, error) {
	if len(b) < headerSize || b[0] != recordVersion {
		return 0, fmt.Errorf("%w: %d bytes, version %d", errRecord, len(b), firstByte(b))
	}
	return int64(binary.LittleEndian.Uint64(b[12:])), nil
}

// decodeRecord decodes record b, complete.
func decodeRecord(b []byte) (recordHeader, error) {
	n, err := recordTotal(b)
	if err != nil {
		return recordHeader{}, err
	}
	if n != len(b) {
		return recordHeader{}, fmt.Errorf("%w: %d bytes of %d", errRecord, len(b), n)
	}
	wl := int(binary.LittleEndian.Uint16(b[28:]))
	fl := int(binary.LittleEndian.Uint16(b[30:]))
	if headerSize+wl+fl > len(b) {
		return recordHeader{}, fmt.Errorf("%w: names of %d bytes in %d", errRecord, wl+fl, len(b))
	}
	return recordHeader{
		kind:     sink.Kind(b[1]),
		retained: b[2]&flagRetained != 0,
		created:  int64(binary.LittleEndian.Uint64(b[4:])),
		appended: int64(binary.LittleEndian.Uint64(b[12:])),
		cum:      binary.LittleEndian.Uint64(b[20:]),
		writer:   b[headerSize : headerSize+wl],
		field:    b[headerSize+wl : headerSize+wl+fl],
		payload:  b[headerSize+wl+fl:],
	}, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// key is the key of part of record seq: both big-endian, so that the
// bucket's order is the stream's.
func key(seq uint64, part int) [10]byte {
	var k [10]byte
	binary.BigEndian.PutUint64(k[:], seq)
	binary.BigEndian.PutUint16(k[8:], uint16(part))
	return k
}

// seqOf and partOf read a key.
func seqOf(k []byte) uint64 {
	if len(k) != 10 {
		return 0
	}
	return binary.BigEndian.Uint64(k)
}

func partOf(k []byte) int {
	if len(k) != 10 {
		return -1
	}
	return int(binary.BigEndian.Uint16(k[8:]))
}

// cursorState is a consumer's durable cursor.
type cursorState struct {
	acked   uint64 // every record up to it settled
	claimed uint64 // records up to it may have been handed to the sink
}

func (c cursorState) encode() []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, c.acked)
	binary.LittleEndian.PutUint64(b[8:], c.claimed)
	return b
}

func decodeCursor(b []byte) (cursorState, bool) {
	if len(b) != 16 {
		return cursorState{}, false
	}
	return cursorState{acked: binary.LittleEndian.Uint64(b), claimed: binary.LittleEndian.Uint64(b[8:])}, true
}

// streamState is what the log keeps of a stream besides its records: its
// last sequence number and cumulative payload bytes, which must survive
// the records' deletion (sequence numbers are never reused), and the
// producer's token (the OPC UA sequence number) up to which every message
// is in the log.
type streamState struct {
	last    uint64
	cum     uint64
	upTo    uint32
	upKnown bool
}

func (s streamState) encode() []byte {
	b := make([]byte, 21)
	binary.LittleEndian.PutUint64(b, s.last)
	binary.LittleEndian.PutUint64(b[8:], s.cum)
	binary.LittleEndian.PutUint32(b[16:], s.upTo)
	if s.upKnown {
		b[20] = 1
	}
	return b
}

func decodeStreamState(b []byte) (streamState, bool) {
	if len(b) != 21 {
		return streamState{}, false
	}
	return streamState{last: binary.LittleEndian.Uint64(b), cum: binary.LittleEndian.Uint64(b[8:]),
		upTo: binary.LittleEndian.Uint32(b[16:]), upKnown: b[20] == 1}, true
}

// redeliveredMark is where a NetworkMessage's MessageId starts; a record
// redelivered after a restart gets RedeliveredPrefix inserted after it.
const redeliveredMark = `{"MessageId":"`
