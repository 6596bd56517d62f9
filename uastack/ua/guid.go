package ua

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Guid is a 16-byte globally unique identifier in the OPC UA layout (Data1..Data4).
// The zero Guid is the null value. Guid is comparable.
type Guid struct {
	Data1 uint32
	Data2 uint16
	Data3 uint16
	Data4 [8]byte
}

// IsNull reports whether g is the all-zero Guid.
func (g Guid) IsNull() bool { return g == Guid{} }

const hexDigits = "0123456789abcdef"

// AppendText appends g as 8-4-4-4-12 lowercase hex digits.
func (g Guid) AppendText(b []byte) []byte {
	var raw [16]byte
	binary.BigEndian.PutUint32(raw[0:], g.Data1)
	binary.BigEndian.PutUint16(raw[4:], g.Data2)
	binary.BigEndian.PutUint16(raw[6:], g.Data3)
	copy(raw[8:], g.Data4[:])
	for i, c := range raw {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return b
}

// String returns g as 8-4-4-4-12 lowercase hex digits.
func (g Guid) String() string { return string(g.AppendText(make([]byte, 0, 36))) }

var errBadGuid = errors.New("ua: invalid Guid, want 8-4-4-4-12 hex digits")

// ParseGuid parses the 8-4-4-4-12 text form, case-insensitively, with optional braces.
func ParseGuid(s string) (Guid, error) {
	if len(s) == 38 && s[0] == '{' && s[37] == '}' {
		s = s[1:37]
	}
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return Guid{}, fmt.Errorf("%w: %q", errBadGuid, s)
	}
	var raw [16]byte
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return Guid{}, fmt.Errorf("%w: %q", errBadGuid, s)
		}
		raw[j] = hi<<4 | lo
		j++
		i += 2
	}
	var g Guid
	g.Data1 = binary.BigEndian.Uint32(raw[0:])
	g.Data2 = binary.BigEndian.Uint16(raw[4:])
	g.Data3 = binary.BigEndian.Uint16(raw[6:])
	copy(g.Data4[:], raw[8:])
	return g, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// ReadGuid reads a Guid.
func (d *Decoder) ReadGuid() Guid {
	p := d.next(16, "Guid")
	if p == nil {
		return Guid{}
	}
	var g Guid
	g.Data1 = binary.LittleEndian.Uint32(p)
	g.Data2 = binary.LittleEndian.Uint16(p[4:])
	g.Data3 = binary.LittleEndian.Uint16(p[6:])
	copy(g.Data4[:], p[8:16])
	return g
}

// WriteGuid writes a Guid.
func (e *Encoder) WriteGuid(g Guid) {
	e.b = binary.LittleEndian.AppendUint32(e.b, g.Data1)
	e.b = binary.LittleEndian.AppendUint16(e.b, g.Data2)
	e.b = binary.LittleEndian.AppendUint16(e.b, g.Data3)
	e.b = append(e.b, g.Data4[:]...)
}
