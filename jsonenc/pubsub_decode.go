package jsonenc

import (
	"math"

	"github.com/uagate/gateway/uastack/ua"
)

// NetworkMessage is a decoded ua-data NetworkMessage (or a message without
// NetworkMessage header: then only Messages is set).
type NetworkMessage struct {
	MessageID       string
	MessageType     string
	PublisherID     string
	WriterGroupName string
	DataSetClassID  ua.Guid
	Messages        []DataSetMessage
}

// DataSetMessage is a decoded DataSetMessage. Header members that were absent
// are zero; Type is KeyFrame when MessageType was absent.
type DataSetMessage struct {
	DataSetWriterID   uint16
	DataSetWriterName string
	PublisherID       string
	WriterGroupName   string
	SequenceNumber    uint32
	MetaDataVersion   ConfigurationVersion
	MinorVersion      uint32
	Timestamp         ua.DateTime
	Status            ua.StatusCode
	Type              DataSetMessageType
	Fields            []Field
}

// Field is one decoded DataSet field, in the order of the JSON.
type Field struct {
	Name  string
	Value ua.DataValue
}

// FieldTypes tells the decoder the built-in type of fields written without
// UaType (VerboseEncoding collapses them); fields not listed are inferred
// (numbers as Double, strings as String). Arrays and matrices are recognised
// from the JSON.
type FieldTypes map[string]ua.TypeID

// DecodeNetworkMessage decodes any of the Part 14 JSON message shapes: a
// NetworkMessage with Messages as an array or an object, a top-level array of
// DataSetMessages, a single DataSetMessage, or a bare payload (JSON-Minimal).
func (d *Decoder) DecodeNetworkMessage(data []byte, types FieldTypes) (*NetworkMessage, error) {
	n, err := d.parse(data)
	if err != nil {
		return nil, err
	}
	nm := &NetworkMessage{}
	switch n.kind {
	case kArr:
		for i := range n.vals {
			if err := d.appendDSM(nm, &n.vals[i], types); err != nil {
				return nil, err
			}
		}
		return nm, nil
	case kObj:
	default:
		return nil, errf("NetworkMessage: got %v", n.kind)
	}
	msgs := n.get("Messages")
	if msgs == nil {
		return nm, d.appendDSM(nm, &n, types)
	}
	strs := []struct {
		key  string
		dest *string
	}{{"MessageId", &nm.MessageID}, {"MessageType", &nm.MessageType}, {"PublisherId", &nm.PublisherID}, {"WriterGroupName", &nm.WriterGroupName}}
	for _, s := range strs {
		if x := n.get(s.key); x != nil {
			if x.kind == kNum { // some publishers write numeric ids
				*s.dest = x.s
				continue
			}
			if *s.dest, err = str(x, s.key); err != nil {
				return nil, err
			}
		}
	}
	if x := n.get("DataSetClassId"); x != nil {
		if nm.DataSetClassID, err = guid(x); err != nil {
			return nil, err
		}
	}
	switch msgs.kind {
	case kArr:
		for i := range msgs.vals {
			if err := d.appendDSM(nm, &msgs.vals[i], types); err != nil {
				return nil, err
			}
		}
	case kObj:
		if err := d.appendDSM(nm, msgs, types); err != nil {
			return nil, err
		}
	case kNull:
	default:
		return nil, errf("Messages: got %v", msgs.kind)
	}
	return nm, nil
}

// isDSMHeader reports whether an object is a DataSetMessage with header
// rather than a bare payload.
func isDSMHeader(n *node) bool {
	if n.get("Payload") != nil {
		return true
	}
	if mt := n.get("MessageType"); mt != nil && mt.kind == kStr && mt.s == "ua-keepalive" {
		return true
	}
	return false
}

func (d *Decoder) appendDSM(nm *NetworkMessage, n *node, types FieldTypes) error {
	if n.kind != kObj {
		return errf("DataSetMessage: got %v", n.kind)
	}
	var m DataSetMessage
	payload := n
	if isDSMHeader(n) {
		if err := d.dsmHeader(n, &m); err != nil {
			return err
		}
		payload = n.get("Payload")
	}
	if payload != nil && payload.kind != kNull {
		if payload.kind != kObj {
			return errf("Payload: got %v", payload.kind)
		}
		m.Fields = make([]Field, len(payload.keys))
		for i, k := range payload.keys {
			m.Fields[i].Name = k
			if err := d.field(&payload.vals[i], &m.Fields[i].Value, types[k]); err != nil {
				return err
			}
		}
	}
	nm.Messages = append(nm.Messages, m)
	return nil
}

func (d *Decoder) dsmHeader(n *node, m *DataSetMessage) error {
	var err error
	if x := n.get("DataSetWriterId"); x != nil {
		_, v, err := integer(x, 0, math.MaxUint16, "DataSetWriterId")
		if err != nil {
			return err
		}
		m.DataSetWriterID = uint16(v)
	}
	for _, s := range []struct {
		key  string
		dest *string
	}{{"DataSetWriterName", &m.DataSetWriterName}, {"PublisherId", &m.PublisherID}, {"WriterGroupName", &m.WriterGroupName}} {
		if x := n.get(s.key); x != nil {
			if *s.dest, err = str(x, s.key); err != nil {
				return err
			}
		}
	}
	u32 := func(key string, dest *uint32) error {
		if x := n.get(key); x != nil {
			_, v, err := integer(x, 0, math.MaxUint32, key)
			if err != nil {
				return err
			}
			*dest = uint32(v)
		}
		return nil
	}
	if err := u32("SequenceNumber", &m.SequenceNumber); err != nil {
		return err
	}
	if err := u32("MinorVersion", &m.MinorVersion); err != nil {
		return err
	}
	if mv := n.get("MetaDataVersion"); mv != nil && mv.kind == kObj {
		for _, s := range []struct {
			key  string
			dest *uint32
		}{{"MajorVersion", &m.MetaDataVersion.MajorVersion}, {"MinorVersion", &m.MetaDataVersion.MinorVersion}} {
			if x := mv.get(s.key); x != nil {
				_, v, err := integer(x, 0, math.MaxUint32, s.key)
				if err != nil {
					return err
				}
				*s.dest = uint32(v)
			}
		}
	}
	if x := n.get("Timestamp"); x != nil {
		if m.Timestamp, err = d.dateTime(x); err != nil {
			return err
		}
	}
	if x := n.get("Status"); x != nil {
		if m.Status, err = d.statusCode(x); err != nil {
			return err
		}
	}
	if x := n.get("MessageType"); x != nil {
		s, err := str(x, "MessageType")
		if err != nil {
			return err
		}
		for i, name := range dsmTypeNames {
			if name == s {
				m.Type = DataSetMessageType(i)
			}
		}
	}
	return nil
}

// field decodes a payload field: a Variant ({"UaType"...} or legacy
// {"Type","Body"}), a DataValue (Part 6 or Verbose {"Value",...}), or a
// collapsed value.
func (d *Decoder) field(n *node, dv *ua.DataValue, t ua.TypeID) error {
	*dv = ua.DataValue{}
	if n.kind == kObj {
		if n.get("UaType") != nil || n.get("Value") != nil || n.get("Status") != nil ||
			n.get("SourceTimestamp") != nil || n.get("ServerTimestamp") != nil || n.get("StatusCode") != nil {
			if t != 0 && n.get("UaType") == nil && n.get("Value") == nil && n.get("Code") != nil {
				// a collapsed StatusCode that replaced the value
			} else {
				return d.dataValue(n, dv, 0, t)
			}
		}
		if n.get("Type") != nil && n.get("Body") != nil {
			v, err := d.variant(n, 0)
			dv.Value = v
			return err
		}
		if n.get("Code") != nil && onlyKeys(n, "Code", "Symbol") && t != ua.TypeExtensionObject && t != ua.TypeDiagnosticInfo {
			s, err := d.statusCode(n)
			dv.Value.SetStatusCode(s)
			if s.IsBad() {
				dv.Status = s
			}
			return err
		}
		if len(n.keys) == 0 {
			return nil
		}
	}
	var err error
	if t != 0 {
		dv.Value, err = d.typedBody(n, t, n.kind == kArr || (n.kind == kObj && n.get("Array") != nil), 0)
	} else {
		dv.Value, err = d.inferVariant(n, 0)
	}
	return err
}

// Sample is a decoded legacy OPC Publisher sample.
type Sample struct {
	NodeID          string
	EndpointURL     string
	ApplicationURI  string
	DisplayName     string
	Timestamp       ua.DateTime
	Value           ua.DataValue
	SequenceNumber  uint32
	PublisherID     string
	DataSetWriterID string
}

// DecodeSamples decodes legacy OPC Publisher samples: one object or an array
// of them. Values are typed through types (by DisplayName) or inferred.
func (d *Decoder) DecodeSamples(data []byte, types FieldTypes) ([]Sample, error) {
	n, err := d.parse(data)
	if err != nil {
		return nil, err
	}
	items := []node{n}
	if n.kind == kArr {
		items = n.vals
	}
	out := make([]Sample, 0, len(items))
	for i := range items {
		it := &items[i]
		if it.kind != kObj {
			return nil, errf("sample: got %v", it.kind)
		}
		var s Sample
		for _, f := range []struct {
			key  string
			dest *string
		}{{"NodeId", &s.NodeID}, {"EndpointUrl", &s.EndpointURL}, {"ApplicationUri", &s.ApplicationURI}, {"DisplayName", &s.DisplayName}} {
			if x := it.get(f.key); x != nil {
				if *f.dest, err = str(x, f.key); err != nil {
					return nil, err
				}
			}
		}
		if x := it.get("Timestamp"); x != nil {
			if s.Timestamp, err = d.dateTime(x); err != nil {
				return nil, err
			}
		}
		if x := it.get("SequenceNumber"); x != nil {
			_, v, err := integer(x, 0, math.MaxUint32, "SequenceNumber")
			if err != nil {
				return nil, err
			}
			s.SequenceNumber = uint32(v)
		}
		if x := it.get("Value"); x != nil {
			if err := d.dataValue(x, &s.Value, 0, types[s.DisplayName]); err != nil {
				return nil, err
			}
		}
		if ext := it.get("ExtensionFields"); ext != nil && ext.kind == kObj {
			if x := ext.get("PublisherId"); x != nil {
				s.PublisherID, _ = str(x, "PublisherId")
			}
			if x := ext.get("DataSetWriterId"); x != nil {
				if x.kind == kNum {
					s.DataSetWriterID = x.s
				} else {
					s.DataSetWriterID, _ = str(x, "DataSetWriterId")
				}
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// onlyKeys reports whether every member of n is one of keys.
func onlyKeys(n *node, keys ...string) bool {
	for _, k := range n.keys {
		found := false
		for _, want := range keys {
			if k == want {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
