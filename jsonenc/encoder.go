package jsonenc

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/uagate/gateway/pooling"
	"github.com/uagate/gateway/uastack/ua"
	"github.com/valyala/bytebufferpool"
)

// Mode selects the OPC UA JSON flavour (Part 6 §5.4 and Annex H).
type Mode uint8

const (
	// Compact is the 1.05 CompactEncoding: NULL and default-valued fields are
	// omitted, Variants carry UaType, StatusCodes carry no Symbol.
	Compact Mode = iota
	// Verbose is the 1.05 VerboseEncoding: default values are written, NULL
	// fields are written as null, StatusCodes carry a Symbol.
	Verbose
	// Reversible104 is the deprecated 1.04 ReversibleEncoding: NodeIds and
	// QualifiedNames as objects with namespace indexes, Variants as Type/Body,
	// StatusCodes as numbers.
	Reversible104
	// NonReversible104 is the deprecated 1.04 NonReversibleEncoding: namespace
	// URIs instead of indexes, Variants reduced to their body, LocalizedText
	// reduced to its text, matrices as nested arrays.
	NonReversible104
)

var modeNames = [...]string{"compact", "verbose", "reversible104", "nonreversible104"}

// String returns the mode's lower-case name.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode parses the names String returns.
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("jsonenc: unknown mode %q (want compact, verbose, reversible104 or nonreversible104)", s)
}

// is105 reports whether m is one of the current (1.05) encodings.
func (m Mode) is105() bool { return m == Compact || m == Verbose }

// omitDefaults reports whether fields equal to their type's default are left out.
func (m Mode) omitDefaults() bool { return m == Compact || m == Reversible104 }

// writeNulls reports whether NULL fields are written as JSON null (Verbose only;
// the 1.04 forms leave NULL fields out).
func (m Mode) writeNulls() bool { return m == Verbose }

// DefaultFlushThreshold is the number of pending bytes after which an Encoder
// that streams to an io.Writer flushes, at the next object or array start.
const DefaultFlushThreshold = 16 << 10

// DefaultMaxDepth bounds the nesting of objects and arrays an Encoder writes.
const DefaultMaxDepth = 100

// UANamespace is the URI of namespace 0.
const UANamespace = "http://opcfoundation.org/UA/"

// Options configure an Encoder. The zero value writes Compact JSON without a
// namespace table into memory.
type Options struct {
	Mode Mode
	// NamespaceURIs is the namespace table: entry i is the URI of namespace
	// index i. NodeIds, ExpandedNodeIds and QualifiedNames in a namespace with a
	// known URI are written in the nsu= form; others keep their index (the
	// "abnormal" ns=<i>; form of Part 6 §5.4.2.10). The slice is read, never
	// modified, and must not change while an Encoder uses it.
	NamespaceURIs []string
	// ServerURIs is the server table used for ExpandedNodeId server indexes
	// (svu= when known, svr=<i>; otherwise).
	ServerURIs []string
	// FlushThreshold is the number of pending bytes after which an Encoder with
	// an io.Writer flushes, at the next StartObject or StartArray. 0 means
	// DefaultFlushThreshold; a negative value never flushes before Flush.
	FlushThreshold int
	// MaxDepth bounds object/array nesting; 0 means DefaultMaxDepth.
	MaxDepth int
}

// Errors reported by an Encoder (through Err) and by the writers.
var (
	// ErrTooDeep is reported when the nesting exceeds Options.MaxDepth (a
	// cyclic DiagnosticInfo, for instance).
	ErrTooDeep = errors.New("jsonenc: nesting too deep")
	// ErrUnbalanced is reported when End* does not match the open container.
	ErrUnbalanced = errors.New("jsonenc: unbalanced object/array")
	// ErrFlushed is reported when a rollback would cross bytes already
	// written to the io.Writer.
	ErrFlushed = errors.New("jsonenc: cannot roll back bytes already flushed")
)

const maxNesting = 256

// Encoder writes OPC UA JSON into a pooled buffer, optionally streaming it to
// an io.Writer. It is not safe for concurrent use.
//
// Structure: StartObject/EndObject, StartArray/EndArray and FieldName write the
// JSON skeleton and insert commas; the Write* methods write one value (an
// array element, or the value after FieldName); the Field* methods write a
// whole "name":value member and apply the mode's rules for NULL and default
// values (omitted in Compact, null in Verbose).
//
// Streaming: with an io.Writer, once FlushThreshold bytes are pending the
// buffer is written out at the next StartObject or StartArray, so the output
// is byte-identical to an unflushed encode and the buffer stays near the
// threshold. Call Flush at the end.
//
// Errors are sticky: the first error (from the io.Writer, or a limit) is kept,
// later writes are ignored, Err and Flush report it.
type Encoder struct {
	buf       *bytebufferpool.ByteBuffer
	b         []byte // the buffer's bytes; appended to directly
	base      []byte // b's backing array at full capacity, to scrub it when b grows
	w         io.Writer
	opts      Options
	threshold int
	maxDepth  int

	needComma bool
	depth     int
	kinds     [maxNesting]byte // '}' or ']' per open container

	err     error
	flushed int64 // bytes written to w so far
	peak    int   // largest number of pending bytes seen

	dates  dateCache
	bin    *ua.Encoder // for binary ExtensionObject bodies
	binBuf []byte
	pooled *pooledEncoder
}

type pooledEncoder struct {
	pooling.Header
	e Encoder
}

// encoders keeps idle Encoders (at most 32, as the .NET stack keeps its JSON
// writers). Their buffers go back to bufPool separately.
var encoders = pooling.NewPool[pooledEncoder](32, func(p *pooledEncoder) {
	bin, binBuf := p.e.bin, p.e.binBuf
	p.e = Encoder{bin: bin, binBuf: binBuf[:0]}
})

func init() { pooling.Register("jsonenc.Encoder", encoders) }

// bufPool is private to this package so that every buffer in it has been
// scrubbed: nobody else puts buffers in.
var bufPool bytebufferpool.Pool

// NewEncoder takes an Encoder from the pool, ready to write with opts to w
// (nil: in memory, read the result with Bytes).
//
// Ownership: the caller owns the Encoder and its buffer until Release. After
// Release neither the Encoder nor any slice returned by Bytes may be used.
func NewEncoder(w io.Writer, opts Options) *Encoder {
	p := encoders.Get()
	p.e.pooled = p
	p.e.Reset(w, opts)
	return &p.e
}

// Release scrubs the buffer (it may hold secrets), returns it and the Encoder
// to their pools. The Encoder must not be used afterwards. Pending bytes that
// were not flushed are discarded.
func (e *Encoder) Release() {
	e.dropBuffer()
	if e.binBuf != nil {
		clear(e.binBuf[:cap(e.binBuf)])
	}
	if p := e.pooled; p != nil {
		encoders.Put(p)
	}
}

// Discard is Release for an Encoder whose buffer is not worth keeping, a
// one-off large document (a writer's metadata message, encoded at start and
// when its fields change): the buffer is scrubbed and left to the GC
// instead of going back to the buffer pool, a sync.Pool that would keep it
// until the second collection after its last use, which in a steady state
// may be minutes away (meanwhile a thousand writers' metadata buffers stay
// resident).
// The Encoder goes back to its pool. Data messages, encoded again and again,
// use Release.
func (e *Encoder) Discard() {
	e.scrubOld()
	if e.buf != nil {
		clear(e.b[:cap(e.b)])
		e.buf, e.b, e.base = nil, nil, nil
	}
	e.Release()
}

func (e *Encoder) dropBuffer() {
	e.scrubOld()
	if e.buf != nil {
		clear(e.b[:cap(e.b)])
		e.buf.B = e.b[:0]
		bufPool.Put(e.buf)
		e.buf, e.b, e.base = nil, nil, nil
	}
}

// Reset discards pending bytes and state and starts a new document with opts
// to w. The buffer is kept (and scrubbed of what was written).
func (e *Encoder) Reset(w io.Writer, opts Options) {
	if e.buf == nil {
		e.buf = bufPool.Get()
		e.b = e.buf.B[:0]
		e.base = e.b[:cap(e.b)]
	} else {
		e.scrubOld()
		clear(e.b)
		e.b = e.b[:0]
	}
	e.w, e.opts = w, opts
	e.threshold = opts.FlushThreshold
	if e.threshold == 0 {
		e.threshold = DefaultFlushThreshold
	}
	if w == nil || e.threshold < 0 {
		e.threshold = math.MaxInt
	}
	e.maxDepth = opts.MaxDepth
	if e.maxDepth <= 0 || e.maxDepth > maxNesting {
		e.maxDepth = min(DefaultMaxDepth, maxNesting)
	}
	e.needComma, e.depth, e.err, e.flushed, e.peak = false, 0, nil, 0, 0
}

// Truncate drops pending bytes, keeping the options and the io.Writer: the
// next value starts a new document. It is how a message writer reuses one
// Encoder for a stream of messages.
func (e *Encoder) Truncate() {
	if len(e.b) > e.peak {
		e.peak = len(e.b)
	}
	e.scrubOld()
	clear(e.b)
	e.b = e.b[:0]
	e.needComma, e.depth = false, 0
}

// Options returns the options the Encoder was set up with.
func (e *Encoder) Options() *Options { return &e.opts }

// Mode returns the encoding mode.
func (e *Encoder) Mode() Mode { return e.opts.Mode }

// SetMode switches the mode for what is written next (a PubSub message writes
// its header and its DataSet fields in different modes).
func (e *Encoder) SetMode(m Mode) { e.opts.Mode = m }

// Bytes returns the pending (not yet flushed) bytes: the whole document when
// the Encoder has no io.Writer. The slice is valid until the next write,
// Reset, Truncate or Release.
func (e *Encoder) Bytes() []byte { return e.b }

// Len returns the number of pending bytes.
func (e *Encoder) Len() int { return len(e.b) }

// Written returns the number of bytes flushed to the io.Writer so far.
func (e *Encoder) Written() int64 { return e.flushed }

// PeakBuffered returns the largest number of bytes that were pending at once.
func (e *Encoder) PeakBuffered() int { return max(e.peak, len(e.b)) }

// Depth returns the number of open objects and arrays: also the number of
// bytes needed to close them.
func (e *Encoder) Depth() int { return e.depth }

// Err returns the first error.
func (e *Encoder) Err() error { return e.err }

// Fail records err unless an error is already recorded.
func (e *Encoder) Fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// Flush writes the pending bytes to the io.Writer (a no-op without one) and
// returns the first error.
func (e *Encoder) Flush() error {
	if e.w != nil && e.err == nil && len(e.b) > 0 {
		e.flush()
	}
	return e.err
}

func (e *Encoder) flush() {
	if len(e.b) > e.peak {
		e.peak = len(e.b)
	}
	n, err := e.w.Write(e.b)
	e.flushed += int64(n)
	if err == nil && n < len(e.b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		e.Fail(err)
	}
	e.scrubOld()
	clear(e.b)
	e.b = e.b[:0]
}

// scrubOld clears the previous backing array when append has moved the buffer
// to a larger one, so that no copy of what was written survives in memory.
func (e *Encoder) scrubOld() {
	if cap(e.b) != cap(e.base) {
		clear(e.base)
		e.base = e.b[:cap(e.b)]
	}
}

// Checkpoint marks a position that Rollback can return to.
type Checkpoint struct {
	n         int
	flushed   int64
	depth     int
	needComma bool
}

// Checkpoint returns the current position.
func (e *Encoder) Checkpoint() Checkpoint {
	return Checkpoint{n: len(e.b), flushed: e.flushed, depth: e.depth, needComma: e.needComma}
}

// Rollback discards everything written after cp. It fails (ErrFlushed) when
// bytes after cp were already flushed; then nothing changes.
func (e *Encoder) Rollback(cp Checkpoint) error {
	if cp.flushed != e.flushed || cp.n > len(e.b) {
		return ErrFlushed
	}
	clear(e.b[cp.n:])
	e.b = e.b[:cp.n]
	e.depth, e.needComma = cp.depth, cp.needComma
	return nil
}

// Since returns the number of bytes written after cp (including flushed ones).
func (e *Encoder) Since(cp Checkpoint) int {
	return int(e.flushed-cp.flushed) + len(e.b) - cp.n
}

// comma starts a value: it flushes once FlushThreshold bytes are pending (so
// that a long array of scalars streams at element boundaries, not only at the
// next object or array) and writes the separating comma when one is needed.
func (e *Encoder) comma() {
	if len(e.b) >= e.threshold && e.err == nil {
		e.flush()
	}
	if e.needComma {
		e.b = append(e.b, ',')
	}
}

// pieceSize is how much of a long string (before escaping, which may make it up
// to six times longer) or ByteString (before base64) is written between flush
// checks, so that the buffer stays within FlushThreshold + 12 KiB.
const pieceSize = 2048

// appendEscapedPieces writes a string longer than the flush threshold escaped,
// in pieces cut at rune starts (so that the escaping of each piece is that of
// the whole), flushing between them.
func (e *Encoder) appendEscapedPieces(s string) {
	for len(s) > 0 {
		n := min(len(s), pieceSize)
		// Back up to the start of a rune; past three continuation bytes there is
		// no valid rune to split, and each invalid byte is escaped alone anyway.
		for k := 0; k < utf8.UTFMax-1 && n < len(s) && !utf8.RuneStart(s[n]); k++ {
			n--
		}
		e.b = appendEscaped(e.b, s[:n])
		s = s[n:]
		if len(e.b) >= e.threshold && e.err == nil {
			e.flush()
		}
	}
}

func (e *Encoder) open(c, closer byte) {
	if e.err != nil {
		return
	}
	if e.depth >= e.maxDepth {
		e.Fail(ErrTooDeep)
		return
	}
	if len(e.b) >= e.threshold {
		e.flush()
	} else if cap(e.b) != cap(e.base) {
		e.scrubOld()
	}
	if e.needComma {
		e.b = append(e.b, ',', c)
	} else {
		e.b = append(e.b, c)
	}
	e.kinds[e.depth] = closer
	e.depth++
	e.needComma = false
}

func (e *Encoder) close(c byte) {
	if e.err != nil {
		return
	}
	if e.depth == 0 || e.kinds[e.depth-1] != c {
		e.Fail(ErrUnbalanced)
		return
	}
	e.depth--
	e.b = append(e.b, c)
	e.needComma = true
}

// StartObject writes '{' (after a comma when needed). When an io.Writer is set
// and at least FlushThreshold bytes are pending, they are flushed first.
func (e *Encoder) StartObject() { e.open('{', '}') }

// EndObject writes '}'.
func (e *Encoder) EndObject() { e.close('}') }

// StartArray writes '[' (after a comma when needed), flushing like StartObject.
func (e *Encoder) StartArray() { e.open('[', ']') }

// EndArray writes ']'.
func (e *Encoder) EndArray() { e.close(']') }

// CloseAll closes every open object and array.
func (e *Encoder) CloseAll() {
	for e.depth > 0 && e.err == nil {
		e.close(e.kinds[e.depth-1])
	}
}

// FieldName writes "name": (after a comma when needed). The value follows.
func (e *Encoder) FieldName(name string) {
	e.comma()
	e.b = appendQuoted(e.b, name)
	e.b = append(e.b, ':')
	e.needComma = false
}

// fieldNameASCII writes a constant field name that needs no escaping.
func (e *Encoder) fieldNameASCII(name string) {
	if e.needComma {
		e.b = append(e.b, ',', '"')
	} else {
		e.b = append(e.b, '"')
	}
	e.b = append(e.b, name...)
	e.b = append(e.b, '"', ':')
	e.needComma = false
}

func (e *Encoder) done() { e.needComma = true }

// WriteRaw writes pre-encoded JSON as one value. The caller vouches for it.
func (e *Encoder) WriteRaw(js []byte) {
	e.comma()
	e.b = append(e.b, js...)
	e.done()
}

// WriteNull writes null.
func (e *Encoder) WriteNull() {
	e.comma()
	e.b = append(e.b, "null"...)
	e.done()
}

// WriteBoolean writes true or false.
func (e *Encoder) WriteBoolean(v bool) {
	e.comma()
	if v {
		e.b = append(e.b, "true"...)
	} else {
		e.b = append(e.b, "false"...)
	}
	e.done()
}

// WriteInt writes a signed integer of up to 32 bits (SByte, Int16, Int32) as a
// JSON number.
func (e *Encoder) WriteInt(v int64) {
	e.comma()
	e.b = strconv.AppendInt(e.b, v, 10)
	e.done()
}

// WriteUint writes an unsigned integer of up to 32 bits (Byte, UInt16, UInt32)
// as a JSON number.
func (e *Encoder) WriteUint(v uint64) {
	e.comma()
	e.b = strconv.AppendUint(e.b, v, 10)
	e.done()
}

// WriteSByte, WriteUInt8 (Byte), WriteInt16, WriteUInt16, WriteInt32 and WriteUInt32
// write JSON numbers.
func (e *Encoder) WriteSByte(v int8)    { e.WriteInt(int64(v)) }
func (e *Encoder) WriteUInt8(v byte)    { e.WriteUint(uint64(v)) }
func (e *Encoder) WriteInt16(v int16)   { e.WriteInt(int64(v)) }
func (e *Encoder) WriteUInt16(v uint16) { e.WriteUint(uint64(v)) }
func (e *Encoder) WriteInt32(v int32)   { e.WriteInt(int64(v)) }
func (e *Encoder) WriteUInt32(v uint32) { e.WriteUint(uint64(v)) }
func (e *Encoder) writeInt32Slice(v []int32) {
	e.StartArray()
	for _, x := range v {
		e.WriteInt32(x)
	}
	e.EndArray()
}

// WriteInt64 writes an Int64 as a decimal JSON string (Part 6 §5.4.2.3).
func (e *Encoder) WriteInt64(v int64) {
	e.comma()
	e.b = append(e.b, '"')
	e.b = strconv.AppendInt(e.b, v, 10)
	e.b = append(e.b, '"')
	e.done()
}

// WriteUInt64 writes a UInt64 as a decimal JSON string.
func (e *Encoder) WriteUInt64(v uint64) {
	e.comma()
	e.b = append(e.b, '"')
	e.b = strconv.AppendUint(e.b, v, 10)
	e.b = append(e.b, '"')
	e.done()
}

// WriteFloat writes a Float as the shortest number that reads back as the
// same float32; NaN and ±Infinity as the strings "NaN", "Infinity",
// "-Infinity" (Part 6 §5.4.2.4).
func (e *Encoder) WriteFloat(v float32) {
	e.comma()
	e.b = appendFloat(e.b, float64(v), 32)
	e.done()
}

// WriteDouble writes a Double like WriteFloat, at 64-bit precision.
func (e *Encoder) WriteDouble(v float64) {
	e.comma()
	e.b = appendFloat(e.b, v, 64)
	e.done()
}

// appendFloat formats like encoding/json (ES6 number-to-string), with the
// special values as strings.
func appendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case f != f:
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	abs := math.Abs(f)
	fmt := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			fmt = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, fmt, -1, bits)
	if fmt == 'e' {
		// clean up e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// WriteString writes a JSON string. Control characters, '"' and '\' are
// escaped, invalid UTF-8 is replaced by U+FFFD, U+2028/U+2029 are escaped.
func (e *Encoder) WriteString(s string) {
	e.comma()
	if len(s) <= e.threshold {
		e.b = appendQuoted(e.b, s)
	} else {
		e.b = append(e.b, '"')
		e.appendEscapedPieces(s)
		e.b = append(e.b, '"')
	}
	e.done()
}

// safeASCII[c] is true for bytes that need no escaping inside a JSON string.
var safeASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = false, false
	return t
}()

const hexDigits = "0123456789abcdef"

func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendEscaped(b, s)
	return append(b, '"')
}

// SWAR constants: one bit or one unit in every byte of a word.
const (
	lsb8 = 0x0101010101010101
	msb8 = 0x8080808080808080
)

// hasByte reports (non-zero) whether a byte of x equals the byte in every
// byte of c (c = b*lsb8): exact in whether there is one.
func hasByte(x, c uint64) uint64 {
	v := x ^ c
	return (v - lsb8) &^ v & msb8
}

// unsafe8 reports (non-zero) whether one of the 8 bytes of x (a word of a
// string, any byte order) needs escaping: below 0x20, '"', '\', DEL or
// beyond ASCII (not safeASCII). It tests the 8 bytes at once (SWAR); field
// names and string values are mostly plain, so appendEscaped skips them 8 at
// a time.
func unsafe8(x uint64) uint64 {
	m := x & msb8                    // ≥ 0x80
	m |= (x - 0x20*lsb8) &^ x & msb8 // < 0x20 (exact once no byte is ≥ 0x80)
	return m | hasByte(x, '"'*lsb8) | hasByte(x, '\\'*lsb8) | hasByte(x, 0x7f*lsb8)
}

// appendEscaped appends s escaped for use inside a JSON string.
func appendEscaped(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		if len(s)-i >= 8 {
			t := s[i : i+8]
			if unsafe8(uint64(t[0])|uint64(t[1])<<8|uint64(t[2])<<16|uint64(t[3])<<24|
				uint64(t[4])<<32|uint64(t[5])<<40|uint64(t[6])<<48|uint64(t[7])<<56) == 0 {
				i += 8
				continue
			}
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if safeASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = appendEscapedByte(b, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}

func appendEscapedByte(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
}
