package bridge

import (
	"crypto/sha1"
	"encoding/binary"
	"strconv"
	"time"

	"github.com/uagate/gateway/bridge/fence"
	"github.com/uagate/gateway/bridge/sink"
	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/ua"
)

// DataSetMetaData (ua-metadata, Part 14 §7.2.5.5.2) of the dataset writers.
//
// A writer's metadata lists its fields in order with their built-in type,
// DataType and ValueRank. The DataType and ValueRank attributes are read once
// when the writer starts; where the DataType is not a built-in type the
// gateway can name (a server-defined structure or enumeration) the built-in
// type is taken from the field's first value, and the metadata is sent again
// with a new MinorVersion. The metadata is sent (Kind KindMetaData, retained)
// before the writer's first data, whenever it changes, and is carried in every
// DataSetMessage as MetaDataVersion.

// versionEpoch is the origin of VersionTime (Part 4 §7.43): seconds since
// 2000-01-01T00:00:00Z.
var versionEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// versionTime returns the VersionTime of now, strictly greater than prev (two
// changes in one second still get distinct versions).
func versionTime(now time.Time, prev uint32) uint32 {
	v := uint32(now.Sub(versionEpoch) / time.Second)
	if v <= prev {
		v = prev + 1
	}
	return v
}

// Abstract DataTypes of namespace 0 whose values carry their own type: the
// field is written with AddFieldAny (VerboseEncoding keeps UaType).
const (
	idBaseDataType = 24
	idNumber       = 26
	idInteger      = 27
	idUInteger     = 28
	idEnumeration  = 29
	idStructure    = 22
)

// builtInOf maps a DataType node id to its built-in type: the built-in
// DataTypes of namespace 0 themselves, and the common subtypes of namespace
// 0. ok is false when the DataType is unknown here (server-defined types,
// enumerations): the first value decides. abstract reports a DataType whose
// values may be of several built-in types.
func builtInOf(dt ua.NodeID) (bt byte, abstract, ok bool) {
	if dt.Namespace != 0 || dt.Type != ua.IDNumeric {
		return 0, false, false
	}
	switch id := dt.Numeric; {
	case id == idBaseDataType || id == idNumber || id == idInteger || id == idUInteger:
		return 0, true, true
	case id == idEnumeration:
		return byte(ua.TypeInt32), true, true
	case id == idStructure:
		return byte(ua.TypeExtensionObject), true, true
	case id >= 1 && id <= 25:
		return byte(id), false, true
	}
	switch dt.Numeric {
	case 290: // Duration
		return byte(ua.TypeDouble), false, true
	case 294, 293: // UtcTime, Date
		return byte(ua.TypeDateTime), false, true
	case 288, 289: // IntegerId, Counter
		return byte(ua.TypeUInt32), false, true
	case 295, 292, 12877, 12878, 12879, 12880, 12881: // LocaleId, Time, NormalizedString, DecimalString, DurationString, TimeString, DateString
		return byte(ua.TypeString), false, true
	case 30, 2000, 2001, 2002, 2003, 311: // Image, ImageBMP/GIF/JPG/PNG, ApplicationInstanceCertificate
		return byte(ua.TypeByteString), false, true
	}
	return 0, false, false
}

// eventFieldType guesses the built-in type of common BaseEventType fields
// for the metadata of event fields; 0 (BaseDataType) when unknown.
func eventFieldType(path string) byte {
	switch path {
	case "EventId":
		return byte(ua.TypeByteString)
	case "EventType", "SourceNode", "ConditionClassId":
		return byte(ua.TypeNodeID)
	case "SourceName", "ConditionName":
		return byte(ua.TypeString)
	case "Time", "ReceiveTime":
		return byte(ua.TypeDateTime)
	case "Message":
		return byte(ua.TypeLocalizedText)
	case "Severity":
		return byte(ua.TypeUInt16)
	}
	return 0
}

// fieldID is the DataSetFieldId of a field: derived from the group, writer
// and field names, so that it stays the same across restarts.
func fieldID(group, writer, field string) ua.Guid {
	h := sha1.New()
	for _, s := range [...]string{group, writer, field} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var sum [sha1.Size]byte
	h.Sum(sum[:0])
	sum[6] = sum[6]&0x0F | 0x50 // version 5 (name-based, SHA-1)
	sum[8] = sum[8]&0x3F | 0x80
	var g ua.Guid
	g.Data1 = binary.BigEndian.Uint32(sum[0:])
	g.Data2 = binary.BigEndian.Uint16(sum[4:])
	g.Data3 = binary.BigEndian.Uint16(sum[6:])
	copy(g.Data4[:], sum[8:16])
	return g
}

// metaData builds the DataSetMetaData of w from the group's fields; g.mu held.
func (g *WriterGroup) metaData(w *writer) *ua.DataSetMetaDataType {
	md := &ua.DataSetMetaDataType{
		Name:                 w.name,
		DataSetClassID:       ua.Guid{},
		ConfigurationVersion: ua.ConfigurationVersionDataType{MajorVersion: w.version.MajorVersion, MinorVersion: w.version.MinorVersion},
	}
	for i := w.first; i < w.end; i++ {
		f := &g.fields[i]
		name := g.fieldName(w, i)
		if f.flags&fieldEvent != 0 {
			for _, path := range w.eventSelect(i) {
				bt := eventFieldType(path)
				dt := ua.NewNumericNodeID(0, uint32(bt))
				if bt == 0 {
					dt = ua.NewNumericNodeID(0, idBaseDataType)
				}
				md.Fields = append(md.Fields, ua.FieldMetaData{
					Name: path, BuiltInType: bt, DataType: dt, ValueRank: -1,
					DataSetFieldID: fieldID(g.name, w.name, name+"/"+path),
				})
			}
			continue
		}
		info, ok := w.odd[i]
		if !ok {
			info.valueRank = -1
		}
		dt := info.dataType
		if dt.IsNull() {
			dt = ua.NewNumericNodeID(0, uint32(f.builtin))
			if f.builtin == 0 {
				dt = ua.NewNumericNodeID(0, idBaseDataType)
			}
		}
		md.Fields = append(md.Fields, ua.FieldMetaData{
			Name:           name,
			BuiltInType:    f.builtin,
			DataType:       dt,
			ValueRank:      info.valueRank,
			DataSetFieldID: fieldID(g.name, w.name, name),
		})
	}
	return md
}

// metaDataPooled is the largest metadata message whose encoder buffer goes
// back to the pool (jsonenc.Encoder.Discard for larger ones).
const metaDataPooled = 16 << 10

// sendMetaData encodes and publishes w's ua-metadata message; g.mu held.
func (g *WriterGroup) sendMetaData(w *writer) {
	if len(g.queues) == 0 {
		w.metaSent = true
		return
	}
	if g.fenced || !g.fence.Open(time.Now()) {
		g.stats.fenced.Add(1)
		return
	}
	e := jsonenc.NewEncoder(nil, jsonenc.Options{Mode: g.headerMode, NamespaceURIs: g.namespaces})
	defer func() {
		if e.Len() > metaDataPooled {
			e.Discard() // a large writer's metadata: rare, not worth keeping
		} else {
			e.Release()
		}
	}()
	jsonenc.EncodeMetaDataMessage(e, &jsonenc.MetaDataMessage{
		MessageID:         g.retainedMessageID(),
		PublisherID:       g.publisher,
		DataSetWriterID:   w.id,
		WriterGroupName:   g.name,
		DataSetWriterName: w.name,
		Timestamp:         ua.Now(),
		MetaData:          g.metaData(w),
	})
	if err := e.Err(); err != nil {
		g.encodeError(err, "metadata of "+w.name)
		return
	}
	if g.maxSize > 0 && e.Len() > g.maxSize {
		// A metadata message cannot be split; send it whole and say so (the
		// broker may still take it: MaxMessageSize is the data's split size).
		g.log.Warn("bridge: metadata message larger than maxMessageSize", "group", g.name,
			"writer", w.name, "bytes", e.Len(), "maxMessageSize", g.maxSize)
	}
	g.publish(sink.KindMetaData, w.name, "", e.Bytes(), 0, false, true, g.queues, w)
	g.stats.metaData.Add(1)
	w.metaSent = true
}

// EpochPrefix starts the MessageId of every message a writer group writes
// under scale-out: "epoch-<n>-<uuid>", n the epoch of the lease holding
// that wrote it (larger for every later holding, whichever replica holds
// it), so that a consumer can tell which holder wrote a message — a
// retained ua-metadata message in particular.
const EpochPrefix = "epoch-"

// epochPrefix is the MessageId prefix of a holding's messages ("" without
// a fence).
func epochPrefix(f *fence.Fence) string {
	if e := f.Epoch(); e != 0 {
		return EpochPrefix + strconv.FormatUint(e, 10) + "-"
	}
	return ""
}

// retainedMessageID is the MessageId of a ua-metadata message.
func (g *WriterGroup) retainedMessageID() string {
	return g.nmHdr.MessageIDPrefix + newMessageID()
}
