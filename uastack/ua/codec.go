package ua

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// Limits bound what a Decoder accepts. Every length read from the wire is checked
// against them before anything is allocated.
type Limits struct {
	MaxStringLength     int // bytes of one String or XmlElement
	MaxByteStringLength int // bytes of one ByteString
	MaxArrayLength      int // elements of one array (all dimensions together for matrices)
	MaxNestingDepth     int // nesting of Variant, ExtensionObject, DiagnosticInfo, DataValue
	MaxMessageSize      int // bytes of one decoded message; 0 means no limit beyond the input

	// MemoryPerByte and MemoryAllowance bound the memory the decoder may allocate
	// for one message: at most MemoryPerByte × the input's length + MemoryAllowance
	// bytes, counted as the Go allocator hands them out (size classes, headers and
	// pages included). The length limits above bound one string or array; this bounds
	// their sum, and the expansion from wire to memory, which a hostile message can
	// push to 48 bytes of Variant per byte (an array of one-byte null Variants) or
	// 72 bytes of DataValue per byte. Exceeding it fails the decoder with
	// ErrMemoryBudgetExceeded before the allocation is made. Capacity reused from
	// slices the decoder is given (a pooled notification, a reused response) is
	// not charged, so a steady stream of messages decoded into the same objects
	// charges nothing for them. 0 means the default (DefaultMemoryPerByte,
	// DefaultMemoryAllowance).
	MemoryPerByte   int
	MemoryAllowance int
}

// Defaults of the memory budget (see Limits.MemoryPerByte). 32 bytes per wire byte
// pass every realistic message (a DataValue of a Boolean without timestamps takes
// 3 bytes on the wire and 72 in memory, 24×; a MonitoredItemNotification with an
// empty value 5 and 80, 16×) and refuse the degenerate ones that are mostly
// allocation: arrays of null Variants (48×), empty DataValues (72×) or empty
// DiagnosticInfos (56×). The allowance lets small messages through whatever their
// shape.
const (
	DefaultMemoryPerByte   = 32
	DefaultMemoryAllowance = 1 << 20
)

// DefaultLimits are the limits used when a Decoder is given none. They follow the
// defaults of the common stacks (strings 1 MiB, arrays 1M elements, 16 MiB messages).
var DefaultLimits = Limits{
	MaxStringLength:     1 << 20,
	MaxByteStringLength: 16 << 20,
	MaxArrayLength:      1 << 20,
	MaxNestingDepth:     64,
	MaxMessageSize:      16 << 20,
	MemoryPerByte:       DefaultMemoryPerByte,
	MemoryAllowance:     DefaultMemoryAllowance,
}

// Errors returned by the codec. They wrap OPC UA status codes so that
// errors.Is(err, StatusBadDecodingError) holds.
var (
	ErrTruncated       = fmt.Errorf("%w: message truncated", StatusBadDecodingError)
	ErrLimitExceeded   = fmt.Errorf("%w: decoding limit exceeded", StatusBadEncodingLimitsExceeded)
	ErrNestingTooDeep  = fmt.Errorf("%w: nesting too deep", StatusBadEncodingLimitsExceeded)
	ErrInvalidEncoding = fmt.Errorf("%w: invalid encoding", StatusBadDecodingError)
	// ErrMemoryBudgetExceeded is reported when decoding a message would allocate
	// more than its memory budget (Limits.MemoryPerByte).
	ErrMemoryBudgetExceeded = fmt.Errorf("%w: decoded message exceeds its memory budget", StatusBadEncodingLimitsExceeded)
)

// DecodeError tells where decoding failed.
type DecodeError struct {
	Offset int    // byte offset in the input
	What   string // what was being decoded
	Err    error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("ua: decoding %s at offset %d: %v", e.What, e.Offset, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Decoder reads OPC UA binary encoded values from a byte slice. It keeps the first
// error: after an error every read returns a zero value, so callers check Err once at
// the end. A Decoder is not safe for concurrent use; it can be reused with Reset.
type Decoder struct {
	b      []byte
	off    int
	err    error
	depth  int
	limits *Limits
	budget int // memory budget of the message (Limits.MemoryPerByte)
	left   int // what is left of it
}

// NewDecoder returns a Decoder over b. A nil limits means DefaultLimits.
func NewDecoder(b []byte, limits *Limits) *Decoder {
	d := &Decoder{}
	d.Reset(b, limits)
	return d
}

// Reset makes d read b from the start with the given limits (nil: DefaultLimits).
func (d *Decoder) Reset(b []byte, limits *Limits) {
	if limits == nil {
		limits = &DefaultLimits
	}
	d.b, d.off, d.err, d.depth, d.limits = b, 0, nil, 0, limits
	per, allow := limits.MemoryPerByte, limits.MemoryAllowance
	if per <= 0 {
		per = DefaultMemoryPerByte
	}
	if allow <= 0 {
		allow = DefaultMemoryAllowance
	}
	d.budget = per*len(b) + allow
	d.left = d.budget
	if limits.MaxMessageSize > 0 && len(b) > limits.MaxMessageSize {
		d.err = &DecodeError{Offset: 0, What: "message", Err: ErrLimitExceeded}
	}
}

// MemoryBudget returns the memory budget of the message being decoded: the most
// bytes decoding it may allocate (see Limits.MemoryPerByte).
func (d *Decoder) MemoryBudget() int { return d.budget }

// MemoryCharged returns the bytes charged against the budget so far: an upper
// bound of what the decoder allocated since Reset.
func (d *Decoder) MemoryCharged() int { return d.budget - d.left }

// allocCost is what an allocation of n bytes takes from the Go heap at most: n rounded up
// to its size class after adding the 8-byte malloc header that objects with
// pointers above 512 bytes carry (added for all: an overestimate for byte slices),
// or to whole 8 KiB pages for large objects. The classes are those of Go 1.26
// (internal/runtime/gc/sizeclasses.go); below 16 bytes an object may take a new
// block of the tiny allocator. FuzzDecodeBudget checks the charge against
// the runtime's own count, so a change of the allocator shows there.
func allocCost(n int) int {
	if n <= 0 {
		return 0
	}
	if n < 16 {
		return 16 // the tiny allocator's block, which a small string may start
	}
	if n > 512 {
		n += 8
	}
	if n > int(sizeClasses[len(sizeClasses)-1]) {
		return (n + 8191) &^ 8191
	}
	lo, hi := 0, len(sizeClasses)-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int(sizeClasses[m]) < n {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return int(sizeClasses[lo])
}

// sizeClasses are the object sizes of the Go allocator's small size classes.
var sizeClasses = [...]uint16{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192,
	208, 224, 240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896,
	1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864,
	5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336,
	16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// charge accounts for an allocation of n bytes about to be made. It fails the
// decoder with ErrMemoryBudgetExceeded and reports false when the message's
// budget would be passed.
func (d *Decoder) charge(n int, what string) bool {
	if d.err != nil {
		return false
	}
	c := allocCost(n)
	if c > d.left {
		d.Fail(what, ErrMemoryBudgetExceeded)
		return false
	}
	d.left -= c
	return true
}

// chargeN charges count elements of size bytes, without overflowing.
func (d *Decoder) chargeN(count, size int, what string) bool {
	if size > 0 && count > d.left/size {
		if d.err == nil {
			d.Fail(what, ErrMemoryBudgetExceeded)
		}
		return false
	}
	return d.charge(count*size, what)
}

// Err returns the first error met, or nil.
func (d *Decoder) Err() error { return d.err }

// Offset returns the number of bytes consumed.
func (d *Decoder) Offset() int { return d.off }

// Remaining returns the number of bytes not yet consumed.
func (d *Decoder) Remaining() int { return len(d.b) - d.off }

// Limits returns the limits in force.
func (d *Decoder) Limits() *Limits { return d.limits }

// Fail records err (if no error was recorded yet) with the current offset.
func (d *Decoder) Fail(what string, err error) {
	if d.err == nil {
		d.err = &DecodeError{Offset: d.off, What: what, Err: err}
	}
}

// next returns the next n bytes or nil after recording a truncation error.
func (d *Decoder) next(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b)-d.off < n {
		d.Fail(what, ErrTruncated)
		return nil
	}
	p := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return p
}

// Enter raises the nesting depth; it fails the decoder and returns false when the
// depth limit is passed. Every successful Enter must be paired with Leave.
func (d *Decoder) Enter(what string) bool {
	if d.err != nil {
		return false
	}
	d.depth++
	if d.depth > d.limits.MaxNestingDepth {
		d.depth--
		d.Fail(what, ErrNestingTooDeep)
		return false
	}
	return true
}

// Leave lowers the nesting depth raised by Enter.
func (d *Decoder) Leave() { d.depth-- }

func (d *Decoder) ReadBoolean() bool {
	p := d.next(1, "Boolean")
	return p != nil && p[0] != 0
}

func (d *Decoder) ReadSByte() int8 {
	p := d.next(1, "SByte")
	if p == nil {
		return 0
	}
	return int8(p[0])
}

func (d *Decoder) ReadUInt8() byte {
	p := d.next(1, "Byte")
	if p == nil {
		return 0
	}
	return p[0]
}

func (d *Decoder) ReadInt16() int16 { return int16(d.ReadUInt16()) }

func (d *Decoder) ReadUInt16() uint16 {
	p := d.next(2, "UInt16")
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint16(p)
}

func (d *Decoder) ReadInt32() int32 { return int32(d.ReadUInt32()) }

func (d *Decoder) ReadUInt32() uint32 {
	p := d.next(4, "UInt32")
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(p)
}

func (d *Decoder) ReadInt64() int64 { return int64(d.ReadUInt64()) }

func (d *Decoder) ReadUInt64() uint64 {
	p := d.next(8, "UInt64")
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(p)
}

func (d *Decoder) ReadFloat() float32 { return math.Float32frombits(d.ReadUInt32()) }

func (d *Decoder) ReadDouble() float64 { return math.Float64frombits(d.ReadUInt64()) }

func (d *Decoder) ReadDateTime() DateTime { return DateTime(d.ReadInt64()) }

func (d *Decoder) ReadStatusCode() StatusCode { return StatusCode(d.ReadUInt32()) }

// readLength reads an Int32 length prefix; -1 (and any negative) means null.
func (d *Decoder) readLength(what string, limit int) (n int, null bool) {
	l := d.ReadInt32()
	if d.err != nil {
		return 0, true
	}
	if l < 0 {
		return 0, true
	}
	if int(l) > limit {
		d.Fail(what, ErrLimitExceeded)
		return 0, true
	}
	return int(l), false
}

// ReadString reads a String. Null and empty both decode to "" (use ReadStringNull to
// tell them apart). The result is a copy; it does not alias the input.
func (d *Decoder) ReadString() string {
	s, _ := d.ReadStringNull()
	return s
}

// ReadStringNull reads a String and reports whether it was null.
func (d *Decoder) ReadStringNull() (string, bool) {
	n, null := d.readLength("String", d.limits.MaxStringLength)
	if null {
		return "", d.err == nil
	}
	p := d.next(n, "String")
	if p == nil || !d.charge(n, "String") {
		return "", false
	}
	return string(p), false
}

// ReadByteString reads a ByteString into a new slice. Null decodes to nil, empty to a
// non-nil empty slice.
func (d *Decoder) ReadByteString() []byte { return d.ReadByteStringInto(nil) }

// ReadByteStringInto reads a ByteString reusing dst's capacity.
func (d *Decoder) ReadByteStringInto(dst []byte) []byte {
	n, null := d.readLength("ByteString", d.limits.MaxByteStringLength)
	if null {
		return nil
	}
	p := d.next(n, "ByteString")
	if p == nil {
		return nil
	}
	if dst == nil || cap(dst) < n {
		if !d.charge(n, "ByteString") {
			return nil
		}
		dst = make([]byte, n)
	}
	dst = dst[:n]
	copy(dst, p)
	return dst
}

// ReadByteStringView reads a ByteString and returns a slice aliasing the input. It is
// valid only as long as the input buffer is.
func (d *Decoder) ReadByteStringView() []byte {
	n, null := d.readLength("ByteString", d.limits.MaxByteStringLength)
	if null {
		return nil
	}
	return d.next(n, "ByteString")
}

// ReadXmlElement reads an XmlElement (a UTF-8 string).
func (d *Decoder) ReadXmlElement() XmlElement {
	n, null := d.readLength("XmlElement", d.limits.MaxStringLength)
	if null {
		return ""
	}
	p := d.next(n, "XmlElement")
	if p == nil || !d.charge(n, "XmlElement") {
		return ""
	}
	return XmlElement(p)
}

// ReadArrayLength reads an array length prefix and checks it against the array
// limit and the bytes left (each element takes at least minElemSize bytes). It
// returns -1 for a null array. On error it returns -1.
func (d *Decoder) ReadArrayLength(what string, minElemSize int) int {
	l := d.ReadInt32()
	if d.err != nil || l < 0 {
		return -1
	}
	n := int(l)
	if n > d.limits.MaxArrayLength {
		d.Fail(what, ErrLimitExceeded)
		return -1
	}
	if minElemSize < 1 {
		minElemSize = 1
	}
	if n > (len(d.b)-d.off)/minElemSize {
		d.Fail(what, ErrTruncated)
		return -1
	}
	return n
}

// Grow returns s resized to n elements, reusing its capacity; n < 0 (a null array)
// gives nil and n == 0 a non-nil empty slice, so that null and empty arrays survive a
// round trip. The elements are not cleared.
func Grow[T any](s []T, n int) []T {
	if n < 0 {
		return nil
	}
	if s != nil && cap(s) >= n {
		if n < len(s) {
			clear(s[n:])
		}
		return s[:n]
	}
	return make([]T, n)
}

// grow is Grow for the decoder: a new backing array is charged against the
// message's memory budget first (reused capacity is not), and nil is returned,
// the decoder failed, when it does not fit.
func grow[T any](d *Decoder, s []T, n int) []T {
	if n < 0 {
		return nil
	}
	if s != nil && cap(s) >= n {
		if n < len(s) {
			clear(s[n:])
		}
		return s[:n]
	}
	var zero T
	if !d.chargeN(n, int(unsafe.Sizeof(zero)), "array") {
		return nil
	}
	return make([]T, n)
}

// littleEndian reports whether the host is little-endian, so numeric arrays can be
// copied in one block.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// readNumericArray reads n fixed-size little-endian elements into dst.
func readNumericArray[T int8 | uint8 | int16 | uint16 | int32 | uint32 | int64 | uint64 | float32 | float64](d *Decoder, dst []T, what string) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	n := d.ReadArrayLength(what, size)
	if n < 0 {
		return nil
	}
	p := d.next(n*size, what)
	if p == nil {
		return nil
	}
	if dst = grow(d, dst, n); dst == nil {
		return nil
	}
	if littleEndian {
		if n > 0 {
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), n*size), p)
		}
		return dst
	}
	for i := range dst {
		switch size {
		case 1:
			*(*uint8)(unsafe.Pointer(&dst[i])) = p[i]
		case 2:
			*(*uint16)(unsafe.Pointer(&dst[i])) = binary.LittleEndian.Uint16(p[2*i:])
		case 4:
			*(*uint32)(unsafe.Pointer(&dst[i])) = binary.LittleEndian.Uint32(p[4*i:])
		case 8:
			*(*uint64)(unsafe.Pointer(&dst[i])) = binary.LittleEndian.Uint64(p[8*i:])
		}
	}
	return dst
}

func (d *Decoder) ReadSByteArray(dst []int8) []int8       { return readNumericArray(d, dst, "SByte[]") }
func (d *Decoder) ReadInt16Array(dst []int16) []int16     { return readNumericArray(d, dst, "Int16[]") }
func (d *Decoder) ReadUInt16Array(dst []uint16) []uint16  { return readNumericArray(d, dst, "UInt16[]") }
func (d *Decoder) ReadInt32Array(dst []int32) []int32     { return readNumericArray(d, dst, "Int32[]") }
func (d *Decoder) ReadUInt32Array(dst []uint32) []uint32  { return readNumericArray(d, dst, "UInt32[]") }
func (d *Decoder) ReadInt64Array(dst []int64) []int64     { return readNumericArray(d, dst, "Int64[]") }
func (d *Decoder) ReadUInt64Array(dst []uint64) []uint64  { return readNumericArray(d, dst, "UInt64[]") }
func (d *Decoder) ReadFloatArray(dst []float32) []float32 { return readNumericArray(d, dst, "Float[]") }
func (d *Decoder) ReadDoubleArray(dst []float64) []float64 {
	return readNumericArray(d, dst, "Double[]")
}

// ReadByteArray reads an array of Byte (not a ByteString: the encoding is the same but
// the meaning differs).
func (d *Decoder) ReadByteArray(dst []byte) []byte { return readNumericArray(d, dst, "Byte[]") }

// ReadBooleanArray reads an array of Boolean.
func (d *Decoder) ReadBooleanArray(dst []bool) []bool {
	n := d.ReadArrayLength("Boolean[]", 1)
	if n < 0 {
		return nil
	}
	p := d.next(n, "Boolean[]")
	if p == nil {
		return nil
	}
	if dst = grow(d, dst, n); dst == nil {
		return nil
	}
	for i, b := range p {
		dst[i] = b != 0
	}
	return dst
}

// ReadDateTimeArray reads an array of DateTime.
func (d *Decoder) ReadDateTimeArray(dst []DateTime) []DateTime {
	return castSlice[DateTime](readNumericArray(d, castSlice[int64](dst), "DateTime[]"))
}

// ReadStatusCodeArray reads an array of StatusCode.
func (d *Decoder) ReadStatusCodeArray(dst []StatusCode) []StatusCode {
	return castSlice[StatusCode](readNumericArray(d, castSlice[uint32](dst), "StatusCode[]"))
}

// castSlice reinterprets a slice between two types of the same size and layout.
func castSlice[To, From any](s []From) []To {
	if s == nil {
		return nil
	}
	if cap(s) == 0 {
		return []To{}
	}
	return unsafe.Slice((*To)(unsafe.Pointer(unsafe.SliceData(s))), cap(s))[:len(s)]
}

// ReadStringArray reads an array of String, reusing dst's capacity.
func (d *Decoder) ReadStringArray(dst []string) []string {
	n := d.ReadArrayLength("String[]", 4)
	if n < 0 {
		return nil
	}
	dst = grow(d, dst, n)
	for i := range dst {
		dst[i] = d.ReadString()
	}
	return dst
}

// Encoder appends OPC UA binary encoded values to a byte slice. It keeps the first
// error (values that cannot be encoded, such as an ExtensionObject of unknown type).
type Encoder struct {
	b     []byte
	err   error
	depth int
}

// NewEncoder returns an Encoder that appends to buf[:0].
func NewEncoder(buf []byte) *Encoder { return &Encoder{b: buf[:0]} }

// Reset makes e append to buf[:0] and clears its error.
func (e *Encoder) Reset(buf []byte) { e.b, e.err, e.depth = buf[:0], nil, 0 }

// Bytes returns the encoded bytes.
func (e *Encoder) Bytes() []byte { return e.b }

// Len returns the number of encoded bytes.
func (e *Encoder) Len() int { return len(e.b) }

// Err returns the first error met, or nil.
func (e *Encoder) Err() error { return e.err }

// Fail records err if no error was recorded yet.
func (e *Encoder) Fail(what string, err error) {
	if e.err == nil {
		e.err = fmt.Errorf("ua: encoding %s: %w", what, err)
	}
}

// enter/leave bound the nesting depth while encoding, so a cyclic value built by
// mistake fails instead of overflowing the stack.
func (e *Encoder) enter(what string) bool {
	e.depth++
	if e.depth > DefaultLimits.MaxNestingDepth {
		e.depth--
		e.Fail(what, ErrNestingTooDeep)
		return false
	}
	return true
}

func (e *Encoder) leave() { e.depth-- }

// PutUInt32At overwrites 4 bytes at offset off (used to back-patch lengths).
func (e *Encoder) PutUInt32At(off int, v uint32) { binary.LittleEndian.PutUint32(e.b[off:], v) }

// WriteRaw appends raw bytes.
func (e *Encoder) WriteRaw(p []byte) { e.b = append(e.b, p...) }

func (e *Encoder) WriteBoolean(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *Encoder) WriteSByte(v int8)            { e.b = append(e.b, byte(v)) }
func (e *Encoder) WriteUInt8(v byte)            { e.b = append(e.b, v) }
func (e *Encoder) WriteInt16(v int16)           { e.b = binary.LittleEndian.AppendUint16(e.b, uint16(v)) }
func (e *Encoder) WriteUInt16(v uint16)         { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *Encoder) WriteInt32(v int32)           { e.b = binary.LittleEndian.AppendUint32(e.b, uint32(v)) }
func (e *Encoder) WriteUInt32(v uint32)         { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *Encoder) WriteInt64(v int64)           { e.b = binary.LittleEndian.AppendUint64(e.b, uint64(v)) }
func (e *Encoder) WriteUInt64(v uint64)         { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *Encoder) WriteFloat(v float32)         { e.WriteUInt32(math.Float32bits(v)) }
func (e *Encoder) WriteDouble(v float64)        { e.WriteUInt64(math.Float64bits(v)) }
func (e *Encoder) WriteDateTime(v DateTime)     { e.WriteInt64(int64(v)) }
func (e *Encoder) WriteStatusCode(v StatusCode) { e.WriteUInt32(uint32(v)) }

// WriteString writes a String; "" is written as null (length -1), as the common
// stacks do. Use WriteStringNull to write an empty non-null string.
func (e *Encoder) WriteString(s string) {
	if s == "" {
		e.WriteInt32(-1)
		return
	}
	e.WriteInt32(int32(len(s)))
	e.b = append(e.b, s...)
}

// WriteStringNull writes s, or null when null is true.
func (e *Encoder) WriteStringNull(s string, null bool) {
	if null {
		e.WriteInt32(-1)
		return
	}
	e.WriteInt32(int32(len(s)))
	e.b = append(e.b, s...)
}

// WriteByteString writes a ByteString; nil is null, an empty non-nil slice is empty.
func (e *Encoder) WriteByteString(p []byte) {
	if p == nil {
		e.WriteInt32(-1)
		return
	}
	e.WriteInt32(int32(len(p)))
	e.b = append(e.b, p...)
}

// WriteXmlElement writes an XmlElement.
func (e *Encoder) WriteXmlElement(x XmlElement) { e.WriteString(string(x)) }

// WriteArrayLength writes an array length prefix; a nil slice is written as -1 by
// passing isNil.
func (e *Encoder) WriteArrayLength(n int, isNil bool) {
	if isNil {
		e.WriteInt32(-1)
		return
	}
	e.WriteInt32(int32(n))
}

func writeNumericArray[T int8 | uint8 | int16 | uint16 | int32 | uint32 | int64 | uint64 | float32 | float64](e *Encoder, s []T) {
	if s == nil {
		e.WriteInt32(-1)
		return
	}
	e.WriteInt32(int32(len(s)))
	if len(s) == 0 {
		return
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	if littleEndian {
		e.b = append(e.b, unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*size)...)
		return
	}
	for i := range s {
		switch size {
		case 1:
			e.b = append(e.b, *(*uint8)(unsafe.Pointer(&s[i])))
		case 2:
			e.b = binary.LittleEndian.AppendUint16(e.b, *(*uint16)(unsafe.Pointer(&s[i])))
		case 4:
			e.b = binary.LittleEndian.AppendUint32(e.b, *(*uint32)(unsafe.Pointer(&s[i])))
		case 8:
			e.b = binary.LittleEndian.AppendUint64(e.b, *(*uint64)(unsafe.Pointer(&s[i])))
		}
	}
}

func (e *Encoder) WriteSByteArray(s []int8)     { writeNumericArray(e, s) }
func (e *Encoder) WriteByteArray(s []byte)      { writeNumericArray(e, s) }
func (e *Encoder) WriteInt16Array(s []int16)    { writeNumericArray(e, s) }
func (e *Encoder) WriteUInt16Array(s []uint16)  { writeNumericArray(e, s) }
func (e *Encoder) WriteInt32Array(s []int32)    { writeNumericArray(e, s) }
func (e *Encoder) WriteUInt32Array(s []uint32)  { writeNumericArray(e, s) }
func (e *Encoder) WriteInt64Array(s []int64)    { writeNumericArray(e, s) }
func (e *Encoder) WriteUInt64Array(s []uint64)  { writeNumericArray(e, s) }
func (e *Encoder) WriteFloatArray(s []float32)  { writeNumericArray(e, s) }
func (e *Encoder) WriteDoubleArray(s []float64) { writeNumericArray(e, s) }

func (e *Encoder) WriteDateTimeArray(s []DateTime) {
	if s == nil {
		e.WriteInt32(-1)
		return
	}
	writeNumericArray(e, castSlice[int64](s))
}

func (e *Encoder) WriteStatusCodeArray(s []StatusCode) {
	if s == nil {
		e.WriteInt32(-1)
		return
	}
	writeNumericArray(e, castSlice[uint32](s))
}

func (e *Encoder) WriteBooleanArray(s []bool) {
	if s == nil {
		e.WriteInt32(-1)
		return
	}
	e.WriteInt32(int32(len(s)))
	for _, v := range s {
		e.WriteBoolean(v)
	}
}

func (e *Encoder) WriteStringArray(s []string) {
	if s == nil {
		e.WriteInt32(-1)
		return
	}
	e.WriteInt32(int32(len(s)))
	for _, v := range s {
		e.WriteString(v)
	}
}

// errUnknownType is reported when a value of a type the codec does not know is encoded.
var errUnknownType = errors.New("unknown type")
