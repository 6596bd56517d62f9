package ua

import (
	"fmt"
	"sync"
)

// Encodable is implemented by every structured type: it encodes its fields in
// order and decodes into its receiver, reusing slices the receiver already holds.
type Encodable interface {
	Encode(e *Encoder)
	Decode(d *Decoder)
}

// Structure is an Encodable with registered node ids (all generated types).
type Structure interface {
	Encodable
	// BinaryEncodingID is the numeric id (namespace 0) of the type's
	// DefaultBinary encoding node.
	BinaryEncodingID() uint32
	// DataTypeID is the numeric id (namespace 0) of the type's DataType node.
	DataTypeID() uint32
}

// Releaser is implemented by pooled types: Release gives the object back to its
// pool; the caller must not use it afterwards.
type Releaser interface{ Release() }

// TypeInfo describes a registered structured type.
type TypeInfo struct {
	Name             string
	DataTypeID       uint32
	BinaryEncodingID uint32
	// New returns a fresh (or pooled) value ready to decode into.
	New func() Encodable
	// Size is the size in bytes of the value New makes, charged against the
	// decoder's memory budget each time it calls New (0 is charged as
	// defaultTypeSize).
	Size uintptr
}

// defaultTypeSize is charged for a registered type that does not give its Size.
const defaultTypeSize = 256

// newValue makes a value of type info for the decoder, charging it first.
func (d *Decoder) newValue(info *TypeInfo) Encodable {
	size := int(info.Size)
	if size == 0 {
		size = defaultTypeSize
	}
	if !d.charge(size, info.Name) {
		return nil
	}
	return info.New()
}

var (
	typesMu     sync.RWMutex
	typesByEnc  = map[uint32]*TypeInfo{}
	typesByType = map[uint32]*TypeInfo{}
	typesByName = map[string]*TypeInfo{}
)

// RegisterType makes a structured type known to the ExtensionObject decoder. The
// generated code registers every standard type in init.
func RegisterType(info TypeInfo) {
	typesMu.Lock()
	defer typesMu.Unlock()
	p := &info
	typesByEnc[info.BinaryEncodingID] = p
	typesByType[info.DataTypeID] = p
	typesByName[info.Name] = p
}

// TypeByEncodingID returns the type registered for a DefaultBinary encoding id.
func TypeByEncodingID(id uint32) (*TypeInfo, bool) {
	typesMu.RLock()
	t, ok := typesByEnc[id]
	typesMu.RUnlock()
	return t, ok
}

// TypeByDataTypeID returns the type registered for a DataType id.
func TypeByDataTypeID(id uint32) (*TypeInfo, bool) {
	typesMu.RLock()
	t, ok := typesByType[id]
	typesMu.RUnlock()
	return t, ok
}

// TypeByName returns the type registered under a name ("ReadRequest").
func TypeByName(name string) (*TypeInfo, bool) {
	typesMu.RLock()
	t, ok := typesByName[name]
	typesMu.RUnlock()
	return t, ok
}

// ExtensionObject encodings.
const (
	ExtensionObjectEmpty  byte = 0x00
	ExtensionObjectBinary byte = 0x01
	ExtensionObjectXML    byte = 0x02
)

// ExtensionObject wraps a structured value. A known type is decoded into Value;
// an unknown one is kept as its raw Body bytes with its TypeID, so it can be passed
// on unchanged.
type ExtensionObject struct {
	TypeID   ExpandedNodeID // the encoding node id (DefaultBinary or DefaultXml)
	Encoding byte           // ExtensionObjectEmpty, ExtensionObjectBinary or ExtensionObjectXML
	Value    Encodable      // decoded body of a known type, or nil
	Body     []byte         // raw body when Value is nil
}

// NewExtensionObject wraps a structured value for encoding.
func NewExtensionObject(v Encodable) ExtensionObject {
	eo := ExtensionObject{Encoding: ExtensionObjectBinary, Value: v}
	if s, ok := v.(Structure); ok {
		eo.TypeID = NewExpandedNodeID(NewNumericNodeID(0, s.BinaryEncodingID()))
	}
	return eo
}

// IsNull reports whether eo carries no body.
func (eo *ExtensionObject) IsNull() bool {
	return eo.Value == nil && eo.Body == nil && eo.Encoding == ExtensionObjectEmpty
}

// Release gives a pooled Value back to its pool and clears eo.
func (eo *ExtensionObject) Release() {
	if r, ok := eo.Value.(Releaser); ok {
		r.Release()
	}
	*eo = ExtensionObject{}
}

// ReadExtensionObject reads an ExtensionObject into eo. When eo already holds a
// Value of the same type, that value is decoded into (its slices reused); otherwise a
// new one comes from the type's New (a pool for the notification types).
func (d *Decoder) ReadExtensionObject(eo *ExtensionObject) {
	if !d.Enter("ExtensionObject") {
		return
	}
	defer d.Leave()
	id := d.ReadNodeIDExpanded()
	enc := d.ReadUInt8()
	if d.err != nil {
		return
	}
	if eo.TypeID != id && eo.Value != nil {
		eo.Release()
	}
	eo.TypeID, eo.Encoding = id, enc
	switch enc {
	case ExtensionObjectEmpty:
		eo.Value, eo.Body = nil, nil
		return
	case ExtensionObjectBinary, ExtensionObjectXML:
	default:
		d.Fail("ExtensionObject", fmt.Errorf("%w: encoding byte 0x%02x", ErrInvalidEncoding, enc))
		return
	}
	n, null := d.readLength("ExtensionObject", d.limits.MaxByteStringLength)
	if null {
		eo.Value, eo.Body = nil, nil
		return
	}
	if n > d.Remaining() {
		d.Fail("ExtensionObject", ErrTruncated)
		return
	}
	var info *TypeInfo
	if enc == ExtensionObjectBinary && id.ServerIndex == 0 && id.NamespaceURI == "" && id.Namespace == 0 && id.Type == IDNumeric {
		info, _ = TypeByEncodingID(id.Numeric)
	}
	if info == nil {
		eo.Value = nil
		p := d.next(n, "ExtensionObject")
		if p == nil || (cap(eo.Body) < n && !d.charge(n, "ExtensionObject")) {
			eo.Body = nil
			return
		}
		eo.Body = append(eo.Body[:0], p...)
		return
	}
	eo.Body = nil
	if eo.Value == nil {
		if eo.Value = d.newValue(info); eo.Value == nil {
			return
		}
	}
	// Decode the body within its declared length: a body that runs past it is an
	// error; one that stops short (a newer version with more fields) is skipped.
	end := d.off + n
	saved := d.b
	d.b = d.b[:end]
	eo.Value.Decode(d)
	d.b = saved
	if d.err != nil {
		return
	}
	d.off = end
}

// ReadNodeIDExpanded reads an ExpandedNodeId (the TypeId of an ExtensionObject is
// a NodeId on the wire, but a decoder accepts the expanded flags leniently).
func (d *Decoder) ReadNodeIDExpanded() ExpandedNodeID {
	n, flags := d.readNodeID()
	if flags != 0 {
		d.Fail("ExtensionObject", fmt.Errorf("%w: TypeId with expanded flags 0x%02x", ErrInvalidEncoding, flags))
	}
	return ExpandedNodeID{NodeID: n}
}

// WriteExtensionObject writes eo; a known Value is encoded with a back-patched
// length.
func (e *Encoder) WriteExtensionObject(eo *ExtensionObject) {
	if eo == nil || (eo.Value == nil && eo.Body == nil) {
		e.WriteNodeID(eo.typeNodeID())
		e.b = append(e.b, ExtensionObjectEmpty)
		return
	}
	if !e.enter("ExtensionObject") {
		return
	}
	defer e.leave()
	id := eo.typeNodeID()
	if eo.Value != nil {
		if s, ok := eo.Value.(Structure); ok && id.IsNull() {
			id = NewNumericNodeID(0, s.BinaryEncodingID())
		}
		e.WriteNodeID(id)
		e.b = append(e.b, ExtensionObjectBinary)
		at := len(e.b)
		e.WriteUInt32(0)
		eo.Value.Encode(e)
		e.PutUInt32At(at, uint32(len(e.b)-at-4))
		return
	}
	e.WriteNodeID(id)
	enc := eo.Encoding
	if enc == ExtensionObjectEmpty {
		enc = ExtensionObjectBinary
	}
	e.b = append(e.b, enc)
	e.WriteByteString(eo.Body)
}

func (eo *ExtensionObject) typeNodeID() NodeID {
	if eo == nil {
		return NodeID{}
	}
	return eo.TypeID.NodeID
}

// WriteStructure writes a service message or structure prefixed by the NodeId of
// its binary encoding, as service messages are sent.
func (e *Encoder) WriteStructure(s Structure) {
	e.WriteNodeID(NewNumericNodeID(0, s.BinaryEncodingID()))
	s.Encode(e)
}

// ReadStructure reads a NodeId-prefixed structure (a service message). When into is
// not nil and of the announced type, it is decoded into and returned; otherwise a
// new value of the registered type is.
func (d *Decoder) ReadStructure(into Structure) (Structure, error) {
	id := d.ReadNodeID()
	if d.err != nil {
		return nil, d.err
	}
	if id.Namespace != 0 || id.Type != IDNumeric {
		d.Fail("message", fmt.Errorf("%w: message type %s", StatusBadServiceUnsupported, id))
		return nil, d.err
	}
	if into != nil && into.BinaryEncodingID() == id.Numeric {
		into.Decode(d)
		return into, d.err
	}
	info, ok := TypeByEncodingID(id.Numeric)
	if !ok {
		d.Fail("message", fmt.Errorf("%w: unknown message type %s", StatusBadServiceUnsupported, id))
		return nil, d.err
	}
	v := d.newValue(info)
	if v == nil {
		return nil, d.err
	}
	s, ok := v.(Structure)
	if !ok {
		d.Fail("message", fmt.Errorf("%w: %s is not a structure", StatusBadServiceUnsupported, info.Name))
		return nil, d.err
	}
	s.Decode(d)
	return s, d.err
}

// Request is a service request: every generated message with a RequestHeader.
type Request interface {
	Structure
	GetRequestHeader() *RequestHeader
}

// Response is a service response (ServiceFault included): every generated message
// with a ResponseHeader.
type Response interface {
	Structure
	GetResponseHeader() *ResponseHeader
}
