package jsonenc

// NetworkMessageContentMask is the Part 14 JsonNetworkMessageContentMask
// (§6.3.2.1.1): which parts of a JSON NetworkMessage are written.
type NetworkMessageContentMask uint32

const (
	// NMNetworkMessageHeader writes the NetworkMessage header (MessageId,
	// MessageType, ...) and the Messages member.
	NMNetworkMessageHeader NetworkMessageContentMask = 0x01
	// NMDataSetMessageHeader writes each DataSetMessage header (the
	// DataSetMessageContentMask header bits then apply) around its Payload.
	NMDataSetMessageHeader NetworkMessageContentMask = 0x02
	// NMSingleDataSetMessage puts exactly one DataSetMessage in each
	// NetworkMessage: Messages is an object, or the DataSetMessage is the
	// whole message.
	NMSingleDataSetMessage NetworkMessageContentMask = 0x04
	// NMPublisherID writes PublisherId in the header.
	NMPublisherID NetworkMessageContentMask = 0x08
	// NMDataSetClassID writes DataSetClassId in the header.
	NMDataSetClassID NetworkMessageContentMask = 0x10
	// NMReplyTo is reserved in 1.05 and ignored.
	NMReplyTo NetworkMessageContentMask = 0x20
	// NMWriterGroupName writes WriterGroupName in the header.
	NMWriterGroupName NetworkMessageContentMask = 0x40
)

// Standard JSON header layouts (Part 14 Annex A.3).
const (
	// LayoutNetworkMessage is JSON-NetworkMessage: header, DataSetMessage
	// headers, PublisherId.
	LayoutNetworkMessage = NMNetworkMessageHeader | NMDataSetMessageHeader | NMPublisherID
	// LayoutDataSetMessage is JSON-DataSetMessage: one DataSetMessage with its
	// header per message, no NetworkMessage header.
	LayoutDataSetMessage = NMDataSetMessageHeader | NMSingleDataSetMessage
	// LayoutMinimal is JSON-Minimal: one bare payload object per message.
	LayoutMinimal = NMSingleDataSetMessage
)

// DataSetMessageContentMask is the Part 14 JsonDataSetMessageContentMask
// (§6.3.2.3.1).
type DataSetMessageContentMask uint32

const (
	DSMDataSetWriterID   DataSetMessageContentMask = 0x001
	DSMMetaDataVersion   DataSetMessageContentMask = 0x002
	DSMSequenceNumber    DataSetMessageContentMask = 0x004
	DSMTimestamp         DataSetMessageContentMask = 0x008
	DSMStatus            DataSetMessageContentMask = 0x010
	DSMMessageType       DataSetMessageContentMask = 0x020
	DSMDataSetWriterName DataSetMessageContentMask = 0x040
	// DSMFieldEncoding1 was ReversibleFieldEncoding in 1.04; with
	// DSMFieldEncoding2 it selects the field encoding (see FieldEncoding).
	DSMFieldEncoding1 DataSetMessageContentMask = 0x080
	// DSMPublisherID writes PublisherId in the DataSetMessage when there is no
	// NetworkMessage header.
	DSMPublisherID DataSetMessageContentMask = 0x100
	// DSMWriterGroupName writes WriterGroupName unless the NetworkMessage
	// header already carries it.
	DSMWriterGroupName DataSetMessageContentMask = 0x200
	// DSMMinorVersion writes MinorVersion (omitted when MetaDataVersion is
	// written).
	DSMMinorVersion   DataSetMessageContentMask = 0x400
	DSMFieldEncoding2 DataSetMessageContentMask = 0x800
)

// DataSetFieldContentMask is the Part 14 DataSetFieldContentMask (§6.2.4.2):
// no bit means fields are Variants; any of the first five means DataValues
// with the selected members.
type DataSetFieldContentMask uint32

const (
	FieldMaskStatusCode        DataSetFieldContentMask = 0x01
	FieldMaskSourceTimestamp   DataSetFieldContentMask = 0x02
	FieldMaskServerTimestamp   DataSetFieldContentMask = 0x04
	FieldMaskSourcePicoSeconds DataSetFieldContentMask = 0x08
	FieldMaskServerPicoSeconds DataSetFieldContentMask = 0x10
	// FieldMaskRawData drops UaType/UaTypeId in VerboseEncoding even where
	// the field's DataType is abstract.
	FieldMaskRawData DataSetFieldContentMask = 0x20
)

// FieldEncoding returns the DataSet field encoding selected by the
// FieldEncoding1/FieldEncoding2 bits (Part 14 Table 112):
//
//	FE2 FE1
//	 1   0   Verbose (recommended)
//	 1   1   Compact
//	 0   1   Reversible104 (deprecated ReversibleFieldEncoding)
//	 0   0   NonReversible104 (deprecated)
func FieldEncoding(m DataSetMessageContentMask) Mode {
	switch m & (DSMFieldEncoding1 | DSMFieldEncoding2) {
	case DSMFieldEncoding2:
		return Verbose
	case DSMFieldEncoding1 | DSMFieldEncoding2:
		return Compact
	case DSMFieldEncoding1:
		return Reversible104
	}
	return NonReversible104
}

// FieldEncodingBits returns the FieldEncoding1/2 bits that select mode.
func FieldEncodingBits(mode Mode) DataSetMessageContentMask {
	switch mode {
	case Verbose:
		return DSMFieldEncoding2
	case Compact:
		return DSMFieldEncoding1 | DSMFieldEncoding2
	case Reversible104:
		return DSMFieldEncoding1
	}
	return 0
}

// DataSetMessageType is the kind of a DataSetMessage.
type DataSetMessageType uint8

const (
	KeyFrame DataSetMessageType = iota
	DeltaFrame
	Event
	KeepAlive
)

var dsmTypeNames = [...]string{"ua-keyframe", "ua-deltaframe", "ua-event", "ua-keepalive"}

// String returns the JSON MessageType ("ua-keyframe" ...).
func (t DataSetMessageType) String() string {
	if int(t) < len(dsmTypeNames) {
		return dsmTypeNames[t]
	}
	return "ua-keyframe"
}
