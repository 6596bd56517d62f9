package jsonenc

import (
	"fmt"
	"math"

	"github.com/uagate/gateway/uastack/ua"
)

// MetaDataMessage is a ua-metadata message (Part 14 §7.2.5.5.2): the
// DataSetMetaData of one DataSetWriter, published retained on the metadata
// topic.
type MetaDataMessage struct {
	MessageID         string
	PublisherID       string
	DataSetWriterID   uint16
	WriterGroupName   string
	DataSetWriterName string
	Timestamp         ua.DateTime
	MetaData          *ua.DataSetMetaDataType
}

// EncodeMetaDataMessage writes m as one JSON document into e.
func EncodeMetaDataMessage(e *Encoder, m *MetaDataMessage) {
	e.StartObject()
	e.fieldNameASCII("MessageId")
	e.WriteString(m.MessageID)
	e.fieldNameASCII("MessageType")
	e.WriteString("ua-metadata")
	e.fieldNameASCII("PublisherId")
	e.WriteString(m.PublisherID)
	e.fieldNameASCII("DataSetWriterId")
	e.WriteUint(uint64(m.DataSetWriterID))
	if m.WriterGroupName != "" {
		e.fieldNameASCII("WriterGroupName")
		e.WriteString(m.WriterGroupName)
	}
	if m.DataSetWriterName != "" {
		e.fieldNameASCII("DataSetWriterName")
		e.WriteString(m.DataSetWriterName)
	}
	if m.Timestamp > 0 {
		e.fieldNameASCII("Timestamp")
		e.WriteDateTime(m.Timestamp)
	}
	if m.MetaData != nil {
		e.fieldNameASCII("MetaData")
		e.WriteDataSetMetaData(m.MetaData)
	}
	e.EndObject()
}

// StatusMessage is a ua-status message (Part 14 §7.2.5.5.5), also used as
// the MQTT Will (IsCyclic false, Status Error).
type StatusMessage struct {
	MessageID      string
	PublisherID    string
	IsCyclic       bool
	Status         ua.PubSubState
	Timestamp      ua.DateTime // written only when IsCyclic
	NextReportTime ua.DateTime // written only when IsCyclic
}

// EncodeStatusMessage writes m as one JSON document into e. Status is
// written as an enumeration (a number in Compact, "Error_3" in Verbose).
func EncodeStatusMessage(e *Encoder, m *StatusMessage) {
	e.StartObject()
	e.fieldNameASCII("MessageId")
	e.WriteString(m.MessageID)
	e.fieldNameASCII("MessageType")
	e.WriteString("ua-status")
	e.fieldNameASCII("PublisherId")
	e.WriteString(m.PublisherID)
	e.fieldNameASCII("IsCyclic")
	e.WriteBoolean(m.IsCyclic)
	e.fieldNameASCII("Status")
	e.WriteEnum(int32(m.Status), enumName(m.Status.String()))
	if m.IsCyclic {
		if m.Timestamp > 0 {
			e.fieldNameASCII("Timestamp")
			e.WriteDateTime(m.Timestamp)
		}
		if m.NextReportTime > 0 {
			e.fieldNameASCII("NextReportTime")
			e.WriteDateTime(m.NextReportTime)
		}
	}
	e.EndObject()
}

// WriteMetaData emits a ua-metadata message through the writer's sink,
// encoded in HeaderMode. It must not be called inside Begin/End. A metadata
// message larger than MaxMessageSize cannot be split: ErrFieldTooLarge.
func (w *NetworkMessageWriter) WriteMetaData(m *MetaDataMessage) error {
	return w.writeDocument(func(e *Encoder) { EncodeMetaDataMessage(e, m) })
}

// WriteStatus emits a ua-status message through the writer's sink.
func (w *NetworkMessageWriter) WriteStatus(m *StatusMessage) error {
	return w.writeDocument(func(e *Encoder) { EncodeStatusMessage(e, m) })
}

func (w *NetworkMessageWriter) writeDocument(f func(e *Encoder)) error {
	if w.err != nil {
		return w.err
	}
	if w.began {
		return fmt.Errorf("%w: discovery message inside Begin/End", ErrState)
	}
	e := w.enc
	e.SetMode(w.opts.HeaderMode)
	f(e)
	if err := e.Err(); err != nil {
		return w.fail(err)
	}
	if n := e.Len(); w.budget > 0 && n > w.budget {
		e.Truncate()
		return fmt.Errorf("%w: discovery message of %d bytes", ErrFieldTooLarge, n)
	}
	w.part = 0
	return w.emitNM()
}

// DecodeMetaDataMessage decodes a ua-metadata message.
func (d *Decoder) DecodeMetaDataMessage(data []byte) (*MetaDataMessage, error) {
	n, err := d.parse(data)
	if err != nil {
		return nil, err
	}
	r := objReader{d: d, n: &n}
	if n.kind != kObj {
		return nil, errf("ua-metadata: got %v", n.kind)
	}
	if t := r.str("MessageType"); t != "ua-metadata" {
		return nil, errf("MessageType %q, want ua-metadata", t)
	}
	m := &MetaDataMessage{
		MessageID:         r.str("MessageId"),
		PublisherID:       r.str("PublisherId"),
		DataSetWriterID:   uint16(r.uint("DataSetWriterId", math.MaxUint16)),
		WriterGroupName:   r.str("WriterGroupName"),
		DataSetWriterName: r.str("DataSetWriterName"),
	}
	if x := r.member("Timestamp"); x != nil {
		m.Timestamp, err = d.dateTime(x)
		r.set(err)
	}
	if x := r.member("MetaData"); x != nil && x.kind != kNull {
		m.MetaData = &ua.DataSetMetaDataType{}
		r.set(d.readDataSetMetaData(x, m.MetaData))
	}
	return m, r.err
}

// DecodeStatusMessage decodes a ua-status message.
func (d *Decoder) DecodeStatusMessage(data []byte) (*StatusMessage, error) {
	n, err := d.parse(data)
	if err != nil {
		return nil, err
	}
	if n.kind != kObj {
		return nil, errf("ua-status: got %v", n.kind)
	}
	r := objReader{d: d, n: &n}
	if t := r.str("MessageType"); t != "ua-status" {
		return nil, errf("MessageType %q, want ua-status", t)
	}
	m := &StatusMessage{
		MessageID:   r.str("MessageId"),
		PublisherID: r.str("PublisherId"),
		IsCyclic:    r.boolean("IsCyclic"),
		Status:      ua.PubSubState(r.enum("Status")),
	}
	if x := r.member("Timestamp"); x != nil {
		m.Timestamp, err = d.dateTime(x)
		r.set(err)
	}
	if x := r.member("NextReportTime"); x != nil {
		m.NextReportTime, err = d.dateTime(x)
		r.set(err)
	}
	return m, r.err
}
