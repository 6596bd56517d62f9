package jsonenc

import (
	"compress/gzip"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/uagate/gateway/uastack/ua"
	"github.com/valyala/bytebufferpool"
)

// Format selects the message format of a NetworkMessageWriter.
type Format uint8

const (
	// FormatPubSub is OPC UA Part 14 JSON (ua-data NetworkMessages).
	FormatPubSub Format = iota
	// FormatSamples is the legacy OPC Publisher "samples" format (one JSON
	// object per value change, batched in an array), for users migrating from
	// OPC Publisher. It is not standard OPC UA.
	FormatSamples
)

// Errors of the NetworkMessageWriter.
var (
	// ErrFieldTooLarge is returned when one field (or a DataSetMessage header)
	// cannot fit into an otherwise empty NetworkMessage of MaxMessageSize.
	// Nothing of it was written; the writer can go on with other fields.
	ErrFieldTooLarge = errors.New("jsonenc: field does not fit into a message of the maximum size")
	// ErrState is returned for calls out of order (a field without a
	// DataSetMessage, a field in a keep-alive, ...).
	ErrState = errors.New("jsonenc: writer call out of order")
)

// NetworkMessageHeader is the header of a ua-data NetworkMessage. Strings are
// referenced, not copied: they must stay unchanged until End returns.
type NetworkMessageHeader struct {
	// MessageID is written as MessageId. Empty: the writer generates a unique
	// id per NetworkMessage. When a message is split, continuation messages get
	// MessageID + "-<n>".
	MessageID string
	// MessageIDPrefix is written before the id the writer generates (when
	// MessageID is empty): a producer's mark on every message, such as the
	// lease epoch of a scaled-out writer group.
	MessageIDPrefix string
	PublisherID     string
	WriterGroupName string
	DataSetClassID  ua.Guid
	ContentMask     NetworkMessageContentMask
}

// ConfigurationVersion is a DataSet's MetaDataVersion.
type ConfigurationVersion struct {
	MajorVersion uint32
	MinorVersion uint32
}

// DataSetMessageHeader is the header of a DataSetMessage. Strings are
// referenced until EndDataSetMessage returns.
type DataSetMessageHeader struct {
	DataSetWriterID   uint16
	DataSetWriterName string
	// PublisherID is written only without a NetworkMessage header.
	PublisherID string
	// WriterGroupName is written only when the NetworkMessage header does not
	// carry it.
	WriterGroupName string
	SequenceNumber  uint32
	MetaDataVersion ConfigurationVersion
	Timestamp       ua.DateTime
	Status          ua.StatusCode
	Type            DataSetMessageType
	ContentMask     DataSetMessageContentMask
	// FieldContentMask selects Variant (0) or DataValue fields and their
	// members.
	FieldContentMask DataSetFieldContentMask

	// EndpointURL and ApplicationURI are written per value in FormatSamples.
	EndpointURL    string
	ApplicationURI string
}

// WriterOptions configure a NetworkMessageWriter.
type WriterOptions struct {
	// NamespaceURIs and ServerURIs: see Options.
	NamespaceURIs []string
	ServerURIs    []string
	// HeaderMode is the encoding of header members that are not DataSet
	// fields (DataSetMessage Status); DataSet fields follow the
	// FieldEncoding bits of each DataSetMessage. Default Compact.
	HeaderMode Mode
	// MaxMessageSize (bytes, 0 = unlimited) bounds every emitted message. A
	// NetworkMessage that would grow past it is closed and emitted, and a new
	// one with the same header continues; a DataSetMessage is split between
	// fields into parts with consecutive SequenceNumbers, and a key frame split
	// so is sent as delta frames (see Splitting in the package documentation
	// and NextSequenceNumber).
	// With Gzip the bound applies to the compressed message; the uncompressed
	// JSON is bounded so that even incompressible data fits.
	MaxMessageSize int
	// Gzip compresses every emitted message (RFC 1952).
	Gzip bool
	// Format is FormatPubSub (default) or FormatSamples.
	Format Format
	// Sink receives each complete message. The slice is valid only during the
	// call (the buffer is reused and scrubbed); copy or retain it through the
	// caller's own pooled buffer. An error from Sink stops the writer.
	Sink func(msg []byte) error
	// Writer, when Sink is nil, receives each message. Without MaxMessageSize
	// and Gzip the message is streamed: written in pieces of about
	// FlushThreshold bytes while it is encoded, so the buffer stays near that
	// size however large the message.
	Writer io.Writer
	// FlushThreshold: see Options.
	FlushThreshold int
}

// NetworkMessageWriter writes Part 14 JSON NetworkMessages (or legacy OPC
// Publisher samples) field by field from caller-owned values, without
// allocating, splitting at MaxMessageSize. It is not safe for concurrent use.
//
// Usage, per publishing cycle:
//
//	w.Begin(&hdr)
//	for each writer: w.BeginDataSetMessage(&dsm); w.AddField(name, &dv)...; w.EndDataSetMessage()
//	w.End()
//
// Ownership: values passed to AddField are read during the call only.
// Release returns the writer's pooled buffers; the writer must not be used
// afterwards.
type NetworkMessageWriter struct {
	opts    WriterOptions
	enc     *Encoder
	stream  bool
	budget  int
	hdr     NetworkMessageHeader
	dsm     DataSetMessageHeader
	began   bool
	nmOpen  bool
	dsmOpen bool
	dsmCont bool   // the open DataSetMessage continues one split off
	seq     uint32 // SequenceNumber of the open (or last) DataSetMessage part
	next    uint32 // what NextSequenceNumber reports
	// typeOff is where the open DataSetMessage's "ua-keyframe" starts in the
	// buffer (-1: none), to be rewritten "ua-deltaframe" if the message is split;
	// reserve keeps the 2 bytes that takes within the budget.
	typeOff  int
	reserve  int
	dsmsInNM int
	fields   int // fields in the open DataSetMessage
	dsmStart Checkpoint
	part     int // NetworkMessages emitted since Begin
	idPrefix [8]byte
	idCount  uint64
	emitted  int
	err      error

	gz    *gzip.Writer
	gzBuf *bytebufferpool.ByteBuffer
}

// NewNetworkMessageWriter returns a writer for opts.
func NewNetworkMessageWriter(opts WriterOptions) *NetworkMessageWriter {
	w := &NetworkMessageWriter{}
	if _, err := rand.Read(w.idPrefix[:]); err != nil {
		binary.LittleEndian.PutUint64(w.idPrefix[:], uint64(ua.Now()))
	}
	w.Reset(opts)
	return w
}

// Reset makes w a writer for opts, as NewNetworkMessageWriter would, but
// keeping its buffers and going on with its MessageId counter (ids stay
// unique): writers busy only during a publishing cycle can be shared through
// the caller's pool instead of each keeping a buffer the size of its largest
// message. It clears the error and the state of a cycle; Reset(WriterOptions{})
// drops every reference to the caller's options (Sink, namespaces).
func (w *NetworkMessageWriter) Reset(opts WriterOptions) {
	*w = NetworkMessageWriter{
		opts: opts, typeOff: -1,
		enc: w.enc, gz: w.gz, gzBuf: w.gzBuf,
		idPrefix: w.idPrefix, idCount: w.idCount,
	}
	w.stream = opts.Sink == nil && opts.Writer != nil && opts.MaxMessageSize <= 0 && !opts.Gzip
	var ew io.Writer
	if w.stream {
		ew = opts.Writer
	}
	eopts := Options{
		Mode:           opts.HeaderMode,
		NamespaceURIs:  opts.NamespaceURIs,
		ServerURIs:     opts.ServerURIs,
		FlushThreshold: opts.FlushThreshold,
	}
	if w.enc == nil {
		w.enc = NewEncoder(ew, eopts)
	} else {
		w.enc.Reset(ew, eopts)
	}
	if w.gzBuf != nil {
		clear(w.gzBuf.B)
		w.gzBuf.B = w.gzBuf.B[:0]
	}
	w.budget = opts.MaxMessageSize
	if w.budget > 0 && opts.Gzip {
		w.budget -= gzipOverhead(w.budget)
	}
}

// gzipOverhead bounds what gzip adds to n incompressible bytes: a 10-byte
// header, an 8-byte trailer and 5 bytes per stored deflate block (Go's
// compressor falls back to stored blocks of at most 64 KiB; counted per
// 16 KiB to be safe), plus the final block.
func gzipOverhead(n int) int { return 18 + 5*(n/16384+2) }

// Release gives the writer's buffers back to their pools. The writer must not
// be used afterwards.
func (w *NetworkMessageWriter) Release() {
	if w.enc != nil {
		w.enc.Release()
		w.enc = nil
	}
	if w.gzBuf != nil {
		clear(w.gzBuf.B[:cap(w.gzBuf.B)])
		bufPool.Put(w.gzBuf)
		w.gzBuf = nil
	}
}

// Encoder returns the writer's Encoder, for callers that add their own
// members (it must be left balanced).
func (w *NetworkMessageWriter) Encoder() *Encoder { return w.enc }

// Emitted returns the number of messages emitted since New or Reset.
func (w *NetworkMessageWriter) Emitted() int { return w.emitted }

// PeakBuffered returns the largest number of bytes the writer buffered.
func (w *NetworkMessageWriter) PeakBuffered() int { return w.enc.PeakBuffered() }

// Err returns the first error that stopped the writer.
func (w *NetworkMessageWriter) Err() error { return w.err }

func (w *NetworkMessageWriter) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// Begin starts a publishing cycle with header hdr (copied; its strings are
// referenced until End). Nothing is written until the first DataSetMessage.
func (w *NetworkMessageWriter) Begin(hdr *NetworkMessageHeader) error {
	if w.err != nil {
		return w.err
	}
	if w.began {
		return fmt.Errorf("%w: Begin before End", ErrState)
	}
	w.hdr = *hdr
	w.began, w.part = true, 0
	return nil
}

func (w *NetworkMessageWriter) hasNMHeader() bool {
	return w.opts.Format == FormatPubSub && w.hdr.ContentMask&NMNetworkMessageHeader != 0
}
func (w *NetworkMessageWriter) hasDSMHeader() bool {
	return w.hdr.ContentMask&NMDataSetMessageHeader != 0
}
func (w *NetworkMessageWriter) single() bool {
	return w.hdr.ContentMask&NMSingleDataSetMessage != 0
}

// over reports whether the message, closed now, would exceed the budget.
func (w *NetworkMessageWriter) over() bool {
	return w.budget > 0 && w.enc.Len()+w.enc.Depth()+w.reserve > w.budget
}

// NextSequenceNumber returns the SequenceNumber that follows those the last
// DataSetMessage used: its header's SequenceNumber plus the number of parts it
// was split into (one when it was not), or the header's own number for a
// keep-alive, which announces the next number rather than using one. A caller
// keeping one counter per DataSetWriter passes it as the next DataSetMessage's
// SequenceNumber. It is valid after EndDataSetMessage, and during a
// DataSetMessage for the parts emitted so far.
func (w *NetworkMessageWriter) NextSequenceNumber() uint32 { return w.next }

// splitKeyFrame rewrites the open DataSetMessage's "ua-keyframe" as
// "ua-deltaframe" before its first part is emitted: a part of a key frame is not
// a complete key frame, and ua-keyframe must always mean one. The budget kept
// room for the two bytes (reserve), and nothing after typeOff is referenced by
// offset when it is called (the field that did not fit was rolled back).
func (w *NetworkMessageWriter) splitKeyFrame() {
	if w.typeOff < 0 {
		return
	}
	e := w.enc
	const from, to = "ua-keyframe", "ua-deltaframe"
	if string(e.b[w.typeOff:w.typeOff+len(from)]) == from {
		n := len(e.b)
		e.b = append(e.b, to[:len(to)-len(from)]...)
		copy(e.b[w.typeOff+len(to):], e.b[w.typeOff+len(from):n])
		copy(e.b[w.typeOff:], to)
	}
	w.typeOff, w.reserve = -1, 0
}

func (w *NetworkMessageWriter) writeMessageID() {
	e := w.enc
	e.fieldNameASCII("MessageId")
	e.comma()
	e.b = append(e.b, '"')
	if w.hdr.MessageID != "" {
		e.b = appendEscaped(e.b, w.hdr.MessageID)
		if w.part > 0 {
			e.b = append(e.b, '-')
			e.b = strconv.AppendInt(e.b, int64(w.part), 10)
		}
	} else {
		if w.hdr.MessageIDPrefix != "" {
			e.b = appendEscaped(e.b, w.hdr.MessageIDPrefix)
		}
		// A version-4 style UUID from a random per-writer prefix and a counter.
		w.idCount++
		var raw [16]byte
		copy(raw[:8], w.idPrefix[:])
		binary.BigEndian.PutUint64(raw[8:], w.idCount)
		raw[6] = raw[6]&0x0F | 0x40
		raw[8] = raw[8]&0x3F | 0x80
		var g ua.Guid
		g.Data1 = binary.BigEndian.Uint32(raw[0:])
		g.Data2 = binary.BigEndian.Uint16(raw[4:])
		g.Data3 = binary.BigEndian.Uint16(raw[6:])
		copy(g.Data4[:], raw[8:])
		e.b = g.AppendText(e.b)
	}
	e.b = append(e.b, '"')
	e.done()
}

// openNM writes the NetworkMessage start up to where DataSetMessages go.
func (w *NetworkMessageWriter) openNM() {
	e := w.enc
	e.SetMode(w.opts.HeaderMode)
	if w.hasNMHeader() {
		e.StartObject()
		w.writeMessageID()
		e.fieldNameASCII("MessageType")
		e.WriteString("ua-data")
		if w.hdr.ContentMask&NMPublisherID != 0 {
			e.fieldNameASCII("PublisherId")
			e.WriteString(w.hdr.PublisherID)
		}
		if w.hdr.ContentMask&NMWriterGroupName != 0 {
			e.fieldNameASCII("WriterGroupName")
			e.WriteString(w.hdr.WriterGroupName)
		}
		if w.hdr.ContentMask&NMDataSetClassID != 0 && !w.hdr.DataSetClassID.IsNull() {
			e.fieldNameASCII("DataSetClassId")
			e.WriteGuid(w.hdr.DataSetClassID)
		}
		e.fieldNameASCII("Messages")
		if !w.single() {
			e.StartArray()
		}
	} else if !w.single() {
		e.StartArray()
	}
	w.nmOpen, w.dsmsInNM = true, 0
}

// emitNM closes the open NetworkMessage and hands it to the sink.
func (w *NetworkMessageWriter) emitNM() error {
	e := w.enc
	e.CloseAll()
	w.nmOpen = false
	w.part++
	if err := e.Err(); err != nil {
		return w.fail(err)
	}
	w.emitted++
	if w.stream {
		if err := e.Flush(); err != nil {
			return w.fail(err)
		}
		e.Truncate()
		return nil
	}
	msg := e.Bytes()
	if w.opts.Gzip {
		var err error
		if msg, err = w.compress(msg); err != nil {
			return w.fail(err)
		}
		if w.opts.MaxMessageSize > 0 && len(msg) > w.opts.MaxMessageSize {
			return w.fail(fmt.Errorf("jsonenc: gzip output of %d bytes exceeds MaxMessageSize %d", len(msg), w.opts.MaxMessageSize))
		}
	}
	var err error
	if w.opts.Sink != nil {
		err = w.opts.Sink(msg)
	} else if w.opts.Writer != nil {
		_, err = w.opts.Writer.Write(msg)
	}
	e.Truncate()
	if w.gzBuf != nil {
		clear(w.gzBuf.B)
		w.gzBuf.B = w.gzBuf.B[:0]
	}
	if err != nil {
		return w.fail(err)
	}
	return nil
}

func (w *NetworkMessageWriter) compress(msg []byte) ([]byte, error) {
	if w.gzBuf == nil {
		w.gzBuf = bufPool.Get()
	}
	w.gzBuf.B = w.gzBuf.B[:0]
	if w.gz == nil {
		w.gz = gzip.NewWriter(w.gzBuf)
	} else {
		w.gz.Reset(w.gzBuf)
	}
	if _, err := w.gz.Write(msg); err != nil {
		return nil, err
	}
	if err := w.gz.Close(); err != nil {
		return nil, err
	}
	return w.gzBuf.B, nil
}

// BeginDataSetMessage starts a DataSetMessage with header h (copied; its
// strings are referenced until EndDataSetMessage). A keep-alive has no
// fields: call EndDataSetMessage right away.
func (w *NetworkMessageWriter) BeginDataSetMessage(h *DataSetMessageHeader) error {
	if w.err != nil {
		return w.err
	}
	if !w.began || w.dsmOpen {
		return fmt.Errorf("%w: BeginDataSetMessage outside Begin/End or inside a DataSetMessage", ErrState)
	}
	w.dsm = *h
	w.dsmCont = false
	w.seq, w.next = h.SequenceNumber, h.SequenceNumber
	if h.Type != KeepAlive {
		w.next++
	}
	if w.nmOpen && w.single() && w.dsmsInNM > 0 && w.opts.Format == FormatPubSub {
		if err := w.emitNM(); err != nil {
			return err
		}
	}
	if !w.nmOpen {
		w.openNM()
	}
	if w.opts.Format == FormatSamples {
		w.dsmOpen, w.fields = true, 0
		return nil
	}
	w.dsmStart = w.enc.Checkpoint()
	w.openDSM()
	if w.over() {
		w.enc.Rollback(w.dsmStart)
		if w.dsmsInNM == 0 {
			return fmt.Errorf("%w: DataSetMessage header of writer %d", ErrFieldTooLarge, h.DataSetWriterID)
		}
		if err := w.emitNM(); err != nil {
			return err
		}
		w.openNM()
		w.dsmStart = w.enc.Checkpoint()
		w.openDSM()
		if w.over() {
			w.enc.Rollback(w.dsmStart)
			return fmt.Errorf("%w: DataSetMessage header of writer %d", ErrFieldTooLarge, h.DataSetWriterID)
		}
	}
	w.dsmOpen, w.fields = true, 0
	w.dsmsInNM++
	return w.checkEnc()
}

func (w *NetworkMessageWriter) checkEnc() error {
	if err := w.enc.Err(); err != nil {
		return w.fail(err)
	}
	return nil
}

// openDSM writes the DataSetMessage header and opens its Payload.
func (w *NetworkMessageWriter) openDSM() {
	e := w.enc
	h := &w.dsm
	e.StartObject()
	if !w.hasDSMHeader() {
		return
	}
	m := h.ContentMask
	e.SetMode(w.opts.HeaderMode)
	if m&DSMDataSetWriterID != 0 {
		e.fieldNameASCII("DataSetWriterId")
		e.WriteUint(uint64(h.DataSetWriterID))
	}
	if m&DSMDataSetWriterName != 0 {
		e.fieldNameASCII("DataSetWriterName")
		e.WriteString(h.DataSetWriterName)
	}
	if m&DSMPublisherID != 0 && !w.hasNMHeader() {
		e.fieldNameASCII("PublisherId")
		e.WriteString(h.PublisherID)
	}
	if m&DSMWriterGroupName != 0 && !(w.hasNMHeader() && w.hdr.ContentMask&NMWriterGroupName != 0) {
		e.fieldNameASCII("WriterGroupName")
		e.WriteString(h.WriterGroupName)
	}
	if m&DSMSequenceNumber != 0 {
		e.fieldNameASCII("SequenceNumber")
		e.WriteUint(uint64(w.seq))
	}
	if m&DSMMetaDataVersion != 0 {
		e.fieldNameASCII("MetaDataVersion")
		e.StartObject()
		e.fieldNameASCII("MajorVersion")
		e.WriteUint(uint64(h.MetaDataVersion.MajorVersion))
		e.fieldNameASCII("MinorVersion")
		e.WriteUint(uint64(h.MetaDataVersion.MinorVersion))
		e.EndObject()
	} else if m&DSMMinorVersion != 0 {
		e.fieldNameASCII("MinorVersion")
		e.WriteUint(uint64(h.MetaDataVersion.MinorVersion))
	}
	if m&DSMTimestamp != 0 && h.Timestamp > 0 {
		e.fieldNameASCII("Timestamp")
		e.WriteDateTime(h.Timestamp)
	}
	if m&DSMStatus != 0 {
		e.SetMode(FieldEncoding(m))
		e.FieldStatusCode("Status", h.Status)
		e.SetMode(w.opts.HeaderMode)
	}
	typ := h.Type
	if w.dsmCont && typ == KeyFrame {
		typ = DeltaFrame
	}
	w.typeOff, w.reserve = -1, 0
	if m&DSMMessageType != 0 {
		e.fieldNameASCII("MessageType")
		e.comma()
		e.b = append(e.b, '"')
		if typ == KeyFrame && w.budget > 0 {
			w.typeOff, w.reserve = len(e.b), len("ua-deltaframe")-len("ua-keyframe")
		}
		e.b = append(e.b, typ.String()...)
		e.b = append(e.b, '"')
		e.done()
	}
	if h.Type != KeepAlive {
		e.fieldNameASCII("Payload")
		e.StartObject()
	}
}

// EndDataSetMessage closes the open DataSetMessage.
func (w *NetworkMessageWriter) EndDataSetMessage() error {
	if w.err != nil {
		return w.err
	}
	if !w.dsmOpen {
		return fmt.Errorf("%w: EndDataSetMessage without BeginDataSetMessage", ErrState)
	}
	w.dsmOpen = false
	w.typeOff, w.reserve = -1, 0
	if w.opts.Format == FormatSamples {
		return nil
	}
	if w.hasDSMHeader() && w.dsm.Type != KeepAlive {
		w.enc.EndObject() // Payload
	}
	w.enc.EndObject()
	return w.checkEnc()
}

// End closes and emits the open NetworkMessage (if it holds any
// DataSetMessage) and ends the publishing cycle.
func (w *NetworkMessageWriter) End() error {
	if w.err != nil {
		return w.err
	}
	if !w.began {
		return fmt.Errorf("%w: End without Begin", ErrState)
	}
	if w.dsmOpen {
		if err := w.EndDataSetMessage(); err != nil {
			return err
		}
	}
	w.began = false
	if w.nmOpen {
		if w.dsmsInNM == 0 {
			w.enc.Truncate()
			w.nmOpen = false
			return nil
		}
		return w.emitNM()
	}
	return nil
}

// AddField writes one DataSet field of the open DataSetMessage. With a
// FieldContentMask of 0 the field is the Variant dv.Value (replaced by the
// StatusCode when dv.Status is Bad); otherwise a DataValue with the selected
// members. In VerboseEncoding the value is "collapsed" (written without
// UaType), as Part 14 §7.2.5.4.2 requires for fields with a concrete
// DataType; use AddFieldAny for fields whose DataType is abstract.
func (w *NetworkMessageWriter) AddField(name string, dv *ua.DataValue) error {
	return w.addField(name, nil, dv, false)
}

// AddFieldAny is AddField for a field whose DataType is abstract
// (BaseDataType, Number, ...): VerboseEncoding keeps UaType unless the
// RawData bit is set.
func (w *NetworkMessageWriter) AddFieldAny(name string, dv *ua.DataValue) error {
	return w.addField(name, nil, dv, true)
}

// AddFieldNode is AddField with the field's source NodeId, written by
// FormatSamples (ignored by FormatPubSub).
func (w *NetworkMessageWriter) AddFieldNode(name string, node *ua.NodeID, dv *ua.DataValue) error {
	return w.addField(name, node, dv, false)
}

func (w *NetworkMessageWriter) addField(name string, node *ua.NodeID, dv *ua.DataValue, keepType bool) error {
	if w.err != nil {
		return w.err
	}
	if !w.dsmOpen || w.dsm.Type == KeepAlive {
		return fmt.Errorf("%w: field %q outside a DataSetMessage with payload", ErrState, name)
	}
	if w.opts.Format == FormatSamples {
		return w.addSample(name, node, dv)
	}
	cp := w.enc.Checkpoint()
	w.writeField(name, node, dv, keepType)
	if err := w.checkEnc(); err != nil {
		return err
	}
	if !w.over() {
		w.fields++
		return nil
	}
	w.enc.Rollback(cp)
	if w.fields == 0 && w.dsmsInNM <= 1 {
		return fmt.Errorf("%w: %q", ErrFieldTooLarge, name)
	}
	if w.fields == 0 {
		// Move the empty DataSetMessage to the next NetworkMessage.
		w.enc.Rollback(w.dsmStart)
		w.dsmsInNM--
	} else {
		// Close this part (emitNM closes what is open); the rest of the
		// DataSetMessage continues in the next NetworkMessage, as the next
		// SequenceNumber.
		w.splitKeyFrame()
		w.dsmCont = true
	}
	if err := w.emitNM(); err != nil {
		return err
	}
	if w.dsmCont && w.fields > 0 {
		w.seq++
		w.next = w.seq + 1
	}
	w.openNM()
	w.dsmStart = w.enc.Checkpoint()
	w.openDSM()
	w.dsmsInNM, w.fields = 1, 0
	if w.over() {
		w.enc.Rollback(w.dsmStart)
		return w.fail(fmt.Errorf("%w: DataSetMessage header of writer %d", ErrFieldTooLarge, w.dsm.DataSetWriterID))
	}
	cp = w.enc.Checkpoint()
	w.writeField(name, node, dv, keepType)
	if err := w.checkEnc(); err != nil {
		return err
	}
	if w.over() {
		w.enc.Rollback(cp)
		return fmt.Errorf("%w: %q", ErrFieldTooLarge, name)
	}
	w.fields++
	return nil
}

// addSample writes one sample: in FormatSamples every field is a top-level
// item of the message (an array element, or the whole message when
// NMSingleDataSetMessage is set).
func (w *NetworkMessageWriter) addSample(name string, node *ua.NodeID, dv *ua.DataValue) error {
	if !w.nmOpen || (w.single() && w.dsmsInNM > 0) {
		if w.nmOpen {
			if err := w.emitNM(); err != nil {
				return err
			}
		}
		w.openNM()
	}
	cp := w.enc.Checkpoint()
	w.writeField(name, node, dv, false)
	if err := w.checkEnc(); err != nil {
		return err
	}
	if w.over() {
		w.enc.Rollback(cp)
		if w.dsmsInNM == 0 {
			return fmt.Errorf("%w: %q", ErrFieldTooLarge, name)
		}
		if err := w.emitNM(); err != nil {
			return err
		}
		w.openNM()
		cp = w.enc.Checkpoint()
		w.writeField(name, node, dv, false)
		if err := w.checkEnc(); err != nil {
			return err
		}
		if w.over() {
			w.enc.Rollback(cp)
			return fmt.Errorf("%w: %q", ErrFieldTooLarge, name)
		}
	}
	w.dsmsInNM++
	w.fields++
	return nil
}

// writeField writes "name":<value> in the open Payload.
func (w *NetworkMessageWriter) writeField(name string, node *ua.NodeID, dv *ua.DataValue, keepType bool) {
	e := w.enc
	mode := FieldEncoding(w.dsm.ContentMask)
	e.SetMode(mode)
	if w.opts.Format == FormatSamples {
		w.writeSample(name, node, dv, mode)
		return
	}
	fcm := w.dsm.FieldContentMask
	raw := fcm&FieldMaskRawData != 0
	collapse := mode == NonReversible104 || (mode == Verbose && (raw || !keepType))
	e.FieldName(name)
	if fcm&0x1F == 0 {
		// Variant representation; a Bad status replaces the value.
		v := &dv.Value
		var sv ua.Variant
		if dv.Status.IsBad() {
			sv.SetStatusCode(dv.Status)
			v = &sv
		}
		if collapse {
			e.WriteVariantBody(v)
		} else {
			e.WriteVariant(v)
		}
		return
	}
	mask := DataValueMask(fcm & 0x1F)
	e.StartObject()
	switch {
	case mode == Compact || (mode == Verbose && !collapse):
		e.writeVariantMembers(&dv.Value, "UaType", "Value")
	case mode == Reversible104:
		if !dv.Value.IsNull() {
			e.fieldNameASCII("Value")
			e.WriteVariant(&dv.Value)
		}
	default: // Verbose collapsed, NonReversible104
		if !dv.Value.IsNull() && !typelessNull(&dv.Value) {
			e.fieldNameASCII("Value")
			e.WriteVariantBody(&dv.Value)
		}
	}
	e.writeDataValueTail(dv, mask)
	e.EndObject()
}

// writeSample writes one legacy OPC Publisher sample object.
func (w *NetworkMessageWriter) writeSample(name string, node *ua.NodeID, dv *ua.DataValue, mode Mode) {
	e := w.enc
	h := &w.dsm
	e.StartObject()
	if node != nil && !node.IsNull() {
		e.fieldNameASCII("NodeId")
		e.comma()
		e.b = append(e.b, '"')
		e.b = e.appendNodeIDText(e.b, node)
		e.b = append(e.b, '"')
		e.done()
	}
	if h.EndpointURL != "" {
		e.fieldNameASCII("EndpointUrl")
		e.WriteString(h.EndpointURL)
	}
	if h.ApplicationURI != "" {
		e.fieldNameASCII("ApplicationUri")
		e.WriteString(h.ApplicationURI)
	}
	if name != "" {
		e.fieldNameASCII("DisplayName")
		e.WriteString(name)
	}
	if h.Timestamp > 0 {
		e.fieldNameASCII("Timestamp")
		e.WriteDateTime(h.Timestamp)
	}
	e.fieldNameASCII("Value")
	e.StartObject()
	if !dv.Value.IsNull() && !(variantValueIsNull(&dv.Value) && (mode == Reversible104 || dv.Value.Type() != ua.TypeDateTime)) {
		e.fieldNameASCII("Value")
		if mode == Reversible104 {
			e.WriteVariant(&dv.Value)
		} else {
			e.SetMode(NonReversible104)
			e.WriteVariantBody(&dv.Value)
			e.SetMode(mode)
		}
	}
	if dv.Status != 0 {
		e.fieldNameASCII("StatusCode")
		e.StartObject()
		if s := dv.Status.Name(); s != "" {
			e.fieldNameASCII("Symbol")
			e.WriteString(s)
		}
		e.fieldNameASCII("Code")
		e.WriteUint(uint64(dv.Status))
		e.EndObject()
	}
	if dv.SourceTimestamp > 0 {
		e.fieldNameASCII("SourceTimestamp")
		e.WriteDateTime(dv.SourceTimestamp)
	}
	if dv.ServerTimestamp > 0 {
		e.fieldNameASCII("ServerTimestamp")
		e.WriteDateTime(dv.ServerTimestamp)
	}
	e.EndObject()
	if h.ContentMask&DSMSequenceNumber != 0 {
		e.fieldNameASCII("SequenceNumber")
		e.WriteUint(uint64(h.SequenceNumber))
	}
	if h.PublisherID != "" || h.ContentMask&DSMDataSetWriterID != 0 {
		e.fieldNameASCII("ExtensionFields")
		e.StartObject()
		if h.PublisherID != "" {
			e.fieldNameASCII("PublisherId")
			e.WriteString(h.PublisherID)
		}
		if h.ContentMask&DSMDataSetWriterID != 0 {
			e.fieldNameASCII("DataSetWriterId")
			e.comma()
			e.b = append(e.b, '"')
			e.b = strconv.AppendUint(e.b, uint64(h.DataSetWriterID), 10)
			e.b = append(e.b, '"')
			e.done()
		}
		e.EndObject()
	}
	e.EndObject()
}
