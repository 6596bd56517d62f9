package ua

import "strconv"

// XmlElement is an XML fragment carried as UTF-8 text (deprecated in OPC UA 1.05).
type XmlElement string

// QualifiedName is a name qualified by a namespace index.
type QualifiedName struct {
	NamespaceIndex uint16
	Name           string
}

// NewQualifiedName returns a QualifiedName.
func NewQualifiedName(ns uint16, name string) QualifiedName {
	return QualifiedName{NamespaceIndex: ns, Name: name}
}

// String returns "<ns>:<name>", or just the name in namespace 0.
func (q QualifiedName) String() string {
	if q.NamespaceIndex == 0 {
		return q.Name
	}
	return strconv.Itoa(int(q.NamespaceIndex)) + ":" + q.Name
}

// IsNull reports whether q is the null QualifiedName.
func (q QualifiedName) IsNull() bool { return q.NamespaceIndex == 0 && q.Name == "" }

// LocalizedText is human readable text with an optional locale.
type LocalizedText struct {
	Locale string
	Text   string
}

// NewLocalizedText returns a LocalizedText without locale.
func NewLocalizedText(text string) LocalizedText { return LocalizedText{Text: text} }

// String returns the text.
func (l LocalizedText) String() string { return l.Text }

// IsNull reports whether both parts are empty.
func (l LocalizedText) IsNull() bool { return l.Locale == "" && l.Text == "" }

// ReadQualifiedName reads a QualifiedName.
func (d *Decoder) ReadQualifiedName() QualifiedName {
	ns := d.ReadUInt16()
	return QualifiedName{NamespaceIndex: ns, Name: d.ReadString()}
}

// WriteQualifiedName writes a QualifiedName.
func (e *Encoder) WriteQualifiedName(q QualifiedName) {
	e.WriteUInt16(q.NamespaceIndex)
	e.WriteString(q.Name)
}

const (
	ltLocale = 0x01
	ltText   = 0x02
)

// ReadLocalizedText reads a LocalizedText.
func (d *Decoder) ReadLocalizedText() LocalizedText {
	mask := d.ReadUInt8()
	var l LocalizedText
	if mask&ltLocale != 0 {
		l.Locale = d.ReadString()
	}
	if mask&ltText != 0 {
		l.Text = d.ReadString()
	}
	return l
}

// WriteLocalizedText writes a LocalizedText.
func (e *Encoder) WriteLocalizedText(l LocalizedText) {
	var mask byte
	if l.Locale != "" {
		mask |= ltLocale
	}
	if l.Text != "" {
		mask |= ltText
	}
	e.WriteUInt8(mask)
	if l.Locale != "" {
		e.WriteString(l.Locale)
	}
	if l.Text != "" {
		e.WriteString(l.Text)
	}
}
