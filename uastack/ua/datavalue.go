package ua

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// DataValue is a value with its status and timestamps. Which parts are present on
// the wire follows from the fields: a null Value, a Good status, a null timestamp
// and zero picoseconds are left out.
type DataValue struct {
	Value             Variant
	Status            StatusCode
	SourceTimestamp   DateTime
	ServerTimestamp   DateTime
	SourcePicoseconds uint16
	ServerPicoseconds uint16
}

// DataValue encoding mask bits (Part 6 §5.2.2.17).
const (
	dvValue             = 0x01
	dvStatus            = 0x02
	dvSourceTimestamp   = 0x04
	dvServerTimestamp   = 0x08
	dvSourcePicoseconds = 0x10
	dvServerPicoseconds = 0x20
)

// Reset clears dv.
func (dv *DataValue) Reset() { *dv = DataValue{} }

// fixedScalarSize is the wire size of the built-in types whose scalars a Variant
// stores inline; 0 for the others.
var fixedScalarSize = [64]uint8{
	TypeBoolean: 1, TypeSByte: 1, TypeByte: 1, TypeInt16: 2, TypeUInt16: 2,
	TypeInt32: 4, TypeUInt32: 4, TypeInt64: 8, TypeUInt64: 8, TypeFloat: 4,
	TypeDouble: 8, TypeDateTime: 8, TypeStatusCode: 4,
}

// maxFixedDataValue is the largest encoding of a DataValue whose value is a fixed
// size scalar: mask, type, 8-byte value, status, two timestamps, two picoseconds.
const maxFixedDataValue = 1 + 1 + 8 + 4 + 8 + 2 + 8 + 2

// ReadDataValue reads a DataValue into dv (overwritten).
func (d *Decoder) ReadDataValue(dv *DataValue) {
	if d.err == nil && len(d.b)-d.off >= maxFixedDataValue && d.readFixedDataValue(dv) {
		return
	}
	d.readDataValueSlow(dv)
}

// readDataValueSlow decodes any DataValue field by field.
func (d *Decoder) readDataValueSlow(dv *DataValue) {
	mask := d.ReadUInt8()
	if mask&dvValue != 0 {
		if !d.Enter("DataValue") {
			return
		}
		d.ReadVariant(&dv.Value)
		d.Leave()
	} else {
		dv.Value.Reset()
	}
	dv.Status, dv.SourceTimestamp, dv.ServerTimestamp, dv.SourcePicoseconds, dv.ServerPicoseconds = 0, 0, 0, 0, 0
	if mask&dvStatus != 0 {
		dv.Status = d.ReadStatusCode()
	}
	if mask&dvSourceTimestamp != 0 {
		dv.SourceTimestamp = d.ReadDateTime()
	}
	if mask&dvSourcePicoseconds != 0 {
		dv.SourcePicoseconds = d.ReadUInt16()
	}
	if mask&dvServerTimestamp != 0 {
		dv.ServerTimestamp = d.ReadDateTime()
	}
	if mask&dvServerPicoseconds != 0 {
		dv.ServerPicoseconds = d.ReadUInt16()
	}
	if mask&0xc0 != 0 {
		d.Fail("DataValue", fmt.Errorf("%w: encoding mask 0x%02x", ErrInvalidEncoding, mask))
	}
}

// readFixedDataValue is the hot path of notification decoding: a DataValue whose
// value is a numeric scalar, read straight from the input with one bounds check.
// It reports false, consuming nothing, for any other shape; the caller made sure
// maxFixedDataValue bytes are left.
func (d *Decoder) readFixedDataValue(dv *DataValue) bool {
	b := d.b[d.off : d.off+maxFixedDataValue]
	mask := b[0]
	if mask&0xc0 != 0 {
		return false
	}
	p := 1
	if mask&dvValue != 0 {
		t := TypeID(b[1])
		size := int(fixedScalarSize[b[1]&0x3f])
		if b[1]&0xc0 != 0 || size == 0 {
			return false
		}
		var n uint64
		switch size {
		case 1:
			n = uint64(b[2])
			switch t {
			case TypeSByte:
				n = uint64(int64(int8(b[2])))
			case TypeBoolean:
				if n != 0 {
					n = 1
				}
			}
		case 2:
			n = uint64(binary.LittleEndian.Uint16(b[2:]))
			if t == TypeInt16 {
				n = uint64(int64(int16(n)))
			}
		case 4:
			n = uint64(binary.LittleEndian.Uint32(b[2:]))
			if t == TypeInt32 {
				n = uint64(int64(int32(n)))
			}
		case 8:
			n = binary.LittleEndian.Uint64(b[2:])
		}
		dv.Value.setInline(t, n)
		p = 2 + size
	} else {
		dv.Value.Reset()
	}
	dv.Status, dv.SourceTimestamp, dv.ServerTimestamp, dv.SourcePicoseconds, dv.ServerPicoseconds = 0, 0, 0, 0, 0
	if mask&dvStatus != 0 {
		dv.Status = StatusCode(binary.LittleEndian.Uint32(b[p:]))
		p += 4
	}
	if mask&dvSourceTimestamp != 0 {
		dv.SourceTimestamp = DateTime(binary.LittleEndian.Uint64(b[p:]))
		p += 8
	}
	if mask&dvSourcePicoseconds != 0 {
		dv.SourcePicoseconds = binary.LittleEndian.Uint16(b[p:])
		p += 2
	}
	if mask&dvServerTimestamp != 0 {
		dv.ServerTimestamp = DateTime(binary.LittleEndian.Uint64(b[p:]))
		p += 8
	}
	if mask&dvServerPicoseconds != 0 {
		dv.ServerPicoseconds = binary.LittleEndian.Uint16(b[p:])
		p += 2
	}
	d.off += p
	return true
}

// WriteDataValue writes dv.
func (e *Encoder) WriteDataValue(dv *DataValue) {
	var mask byte
	if dv.Value.typ != TypeNull {
		mask |= dvValue
	}
	if dv.Status != 0 {
		mask |= dvStatus
	}
	if dv.SourceTimestamp != 0 {
		mask |= dvSourceTimestamp
	}
	if dv.SourcePicoseconds != 0 {
		mask |= dvSourcePicoseconds
	}
	if dv.ServerTimestamp != 0 {
		mask |= dvServerTimestamp
	}
	if dv.ServerPicoseconds != 0 {
		mask |= dvServerPicoseconds
	}
	e.b = append(e.b, mask)
	if mask&dvValue != 0 {
		if !e.enter("DataValue") {
			return
		}
		e.WriteVariant(&dv.Value)
		e.leave()
	}
	if mask&dvStatus != 0 {
		e.WriteStatusCode(dv.Status)
	}
	if mask&dvSourceTimestamp != 0 {
		e.WriteDateTime(dv.SourceTimestamp)
	}
	if mask&dvSourcePicoseconds != 0 {
		e.WriteUInt16(dv.SourcePicoseconds)
	}
	if mask&dvServerTimestamp != 0 {
		e.WriteDateTime(dv.ServerTimestamp)
	}
	if mask&dvServerPicoseconds != 0 {
		e.WriteUInt16(dv.ServerPicoseconds)
	}
}

// DiagnosticInfo carries vendor diagnostics for an operation.
type DiagnosticInfo struct {
	SymbolicID          int32
	NamespaceURI        int32
	Locale              int32
	LocalizedText       int32
	AdditionalInfo      string
	InnerStatusCode     StatusCode
	InnerDiagnosticInfo *DiagnosticInfo
	// Mask tells which fields are present (the Has* bits below). Writers set the
	// bits of the fields they fill; a zero Mask writes an empty DiagnosticInfo.
	Mask byte
}

// DiagnosticInfo encoding mask bits (Part 6 §5.2.2.12).
const (
	DiagHasSymbolicID          = 0x01
	DiagHasNamespaceURI        = 0x02
	DiagHasLocalizedText       = 0x04
	DiagHasLocale              = 0x08
	DiagHasAdditionalInfo      = 0x10
	DiagHasInnerStatusCode     = 0x20
	DiagHasInnerDiagnosticInfo = 0x40
)

// ReadDiagnosticInfo reads a DiagnosticInfo into di (overwritten).
func (d *Decoder) ReadDiagnosticInfo(di *DiagnosticInfo) {
	*di = DiagnosticInfo{}
	if !d.Enter("DiagnosticInfo") {
		return
	}
	defer d.Leave()
	mask := d.ReadUInt8()
	di.Mask = mask
	if mask&DiagHasSymbolicID != 0 {
		di.SymbolicID = d.ReadInt32()
	}
	if mask&DiagHasNamespaceURI != 0 {
		di.NamespaceURI = d.ReadInt32()
	}
	if mask&DiagHasLocale != 0 {
		di.Locale = d.ReadInt32()
	}
	if mask&DiagHasLocalizedText != 0 {
		di.LocalizedText = d.ReadInt32()
	}
	if mask&DiagHasAdditionalInfo != 0 {
		di.AdditionalInfo = d.ReadString()
	}
	if mask&DiagHasInnerStatusCode != 0 {
		di.InnerStatusCode = d.ReadStatusCode()
	}
	if mask&DiagHasInnerDiagnosticInfo != 0 && d.charge(int(unsafe.Sizeof(DiagnosticInfo{})), "DiagnosticInfo") {
		di.InnerDiagnosticInfo = &DiagnosticInfo{}
		d.ReadDiagnosticInfo(di.InnerDiagnosticInfo)
	}
	if mask&0x80 != 0 {
		d.Fail("DiagnosticInfo", fmt.Errorf("%w: encoding mask 0x%02x", ErrInvalidEncoding, mask))
	}
}

// WriteDiagnosticInfo writes di.
func (e *Encoder) WriteDiagnosticInfo(di *DiagnosticInfo) {
	if di == nil {
		e.b = append(e.b, 0)
		return
	}
	if !e.enter("DiagnosticInfo") {
		return
	}
	defer e.leave()
	mask := di.Mask &^ DiagHasInnerDiagnosticInfo
	if di.InnerDiagnosticInfo != nil {
		mask |= DiagHasInnerDiagnosticInfo
	}
	e.b = append(e.b, mask)
	if mask&DiagHasSymbolicID != 0 {
		e.WriteInt32(di.SymbolicID)
	}
	if mask&DiagHasNamespaceURI != 0 {
		e.WriteInt32(di.NamespaceURI)
	}
	if mask&DiagHasLocale != 0 {
		e.WriteInt32(di.Locale)
	}
	if mask&DiagHasLocalizedText != 0 {
		e.WriteInt32(di.LocalizedText)
	}
	if mask&DiagHasAdditionalInfo != 0 {
		e.WriteString(di.AdditionalInfo)
	}
	if mask&DiagHasInnerStatusCode != 0 {
		e.WriteStatusCode(di.InnerStatusCode)
	}
	if di.InnerDiagnosticInfo != nil {
		e.WriteDiagnosticInfo(di.InnerDiagnosticInfo)
	}
}
