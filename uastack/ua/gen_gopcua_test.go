package ua

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	gua "github.com/gopcua/opcua/ua"
)

// Cross-check against github.com/gopcua/opcua, an independent implementation with
// its own generated types and a reflection-based encoder: the same value, built as a
// gopcua struct, must encode to the same bytes.
//
// genToGopcua builds the gopcua value from ours field by field (gopcua names its
// fields by the same Go-style rules, holds structures by pointer and uses time.Time
// for DateTime). It fails when the two field lists differ, which happens only where
// the schema versions differ.

// genGopcuaType returns the gopcua type registered for a DefaultBinary encoding id.
// gopcua has no exported lookup, so it is found by letting gopcua decode an
// ExtensionObject with that type id and a non-empty body.
func genGopcuaType(encID uint32, body []byte) (t reflect.Type, ok bool) {
	if len(body) == 0 {
		return nil, false
	}
	e := NewEncoder(nil)
	e.WriteNodeID(NewNumericNodeID(0, encID))
	e.WriteUInt8(ExtensionObjectBinary)
	e.WriteByteString(body)
	defer func() {
		if recover() != nil {
			t, ok = nil, false
		}
	}()
	var eo gua.ExtensionObject
	_, _ = eo.Decode(e.Bytes())
	if eo.Value == nil {
		return nil, false
	}
	return reflect.TypeOf(eo.Value), true
}

// genGpNodeID converts n, choosing the same compact encoding as WriteNodeID.
func genGpNodeID(n NodeID) *gua.NodeID {
	switch n.Type {
	case IDString:
		return gua.NewStringNodeID(n.Namespace, n.Text)
	case IDGuid:
		return gua.NewGUIDNodeID(n.Namespace, n.Guid.String())
	case IDOpaque:
		return gua.NewByteStringNodeID(n.Namespace, []byte(n.Text))
	}
	switch {
	case n.Namespace == 0 && n.Numeric <= 0xff:
		return gua.NewTwoByteNodeID(byte(n.Numeric))
	case n.Namespace <= 0xff && n.Numeric <= 0xffff:
		return gua.NewFourByteNodeID(byte(n.Namespace), uint16(n.Numeric))
	}
	return gua.NewNumericNodeID(n.Namespace, n.Numeric)
}

func genGpExpandedNodeID(x ExpandedNodeID) *gua.ExpandedNodeID {
	n := genGpNodeID(x.NodeID)
	if x.NamespaceURI != "" {
		n.SetURIFlag()
	}
	if x.ServerIndex != 0 {
		n.SetIndexFlag()
	}
	return &gua.ExpandedNodeID{NodeID: n, NamespaceURI: x.NamespaceURI, ServerIndex: x.ServerIndex}
}

func genGpTime(d DateTime) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return d.Time()
}

func genGpLocalizedText(l LocalizedText) *gua.LocalizedText {
	return gua.NewLocalizedTextWithLocale(l.Text, l.Locale)
}

func genGpVariant(v *Variant) (*gua.Variant, error) {
	switch x := v.Value().(type) {
	case nil:
		return gua.MustVariant(nil), nil
	case DateTime:
		return gua.MustVariant(genGpTime(x)), nil
	case StatusCode:
		return gua.MustVariant(gua.StatusCode(x)), nil
	case NodeID:
		return gua.MustVariant(genGpNodeID(x)), nil
	case LocalizedText:
		return gua.MustVariant(genGpLocalizedText(x)), nil
	case QualifiedName:
		return gua.MustVariant(&gua.QualifiedName{NamespaceIndex: x.NamespaceIndex, Name: x.Name}), nil
	case bool, int8, byte, int16, uint16, int32, uint32, int64, uint64, float32, float64, string, []byte,
		[]bool, []int16, []uint16, []int32, []uint32, []int64, []uint64, []float32, []float64, []string:
		return gua.NewVariant(x)
	default:
		return nil, fmt.Errorf("variant of %T not converted", x)
	}
}

func genGpDataValue(dv *DataValue) (*gua.DataValue, error) {
	g := &gua.DataValue{
		Status: gua.StatusCode(dv.Status), SourceTimestamp: genGpTime(dv.SourceTimestamp),
		ServerTimestamp: genGpTime(dv.ServerTimestamp), SourcePicoseconds: dv.SourcePicoseconds,
		ServerPicoseconds: dv.ServerPicoseconds,
	}
	if !dv.Value.IsNull() {
		v, err := genGpVariant(&dv.Value)
		if err != nil {
			return nil, err
		}
		g.Value = v
	}
	g.UpdateMask()
	return g, nil
}

func genGpDiagnosticInfo(di *DiagnosticInfo) *gua.DiagnosticInfo {
	mask := di.Mask &^ DiagHasInnerDiagnosticInfo
	var inner *gua.DiagnosticInfo
	if di.InnerDiagnosticInfo != nil {
		mask |= DiagHasInnerDiagnosticInfo
		inner = genGpDiagnosticInfo(di.InnerDiagnosticInfo)
	}
	return &gua.DiagnosticInfo{
		EncodingMask: mask, SymbolicID: di.SymbolicID, NamespaceURI: di.NamespaceURI,
		Locale: di.Locale, LocalizedText: di.LocalizedText, AdditionalInfo: di.AdditionalInfo,
		InnerStatusCode: gua.StatusCode(di.InnerStatusCode), InnerDiagnosticInfo: inner,
	}
}

func genGpExtensionObject(eo *ExtensionObject) (*gua.ExtensionObject, error) {
	if eo.Value == nil {
		if eo.Body != nil {
			return nil, fmt.Errorf("raw ExtensionObject bodies are not converted")
		}
		return nil, nil // gopcua encodes a nil ExtensionObject as an empty one
	}
	s, ok := eo.Value.(Structure)
	if !ok {
		return nil, fmt.Errorf("ExtensionObject of %T", eo.Value)
	}
	e := NewEncoder(nil)
	s.Encode(e)
	gt, ok := genGopcuaType(s.BinaryEncodingID(), e.Bytes())
	if !ok {
		return nil, fmt.Errorf("gopcua does not know %T", s)
	}
	v, err := genToGopcua(reflect.ValueOf(s), gt)
	if err != nil {
		return nil, err
	}
	return &gua.ExtensionObject{
		EncodingMask: gua.ExtensionObjectBinary,
		TypeID:       &gua.ExpandedNodeID{NodeID: genGpNodeID(NewNumericNodeID(0, s.BinaryEncodingID()))},
		Value:        v.Interface(),
	}, nil
}

// genToGopcua converts src (one of our values) to the gopcua type dt.
func genToGopcua(src reflect.Value, dt reflect.Type) (reflect.Value, error) {
	if src.Kind() == reflect.Pointer {
		src = src.Elem()
	}
	var out any
	var err error
	switch x := src.Addr().Interface().(type) {
	case *DateTime:
		out = genGpTime(*x)
	case *NodeID:
		out = genGpNodeID(*x)
	case *ExpandedNodeID:
		out = genGpExpandedNodeID(*x)
	case *Guid:
		out = &gua.GUID{Data1: x.Data1, Data2: x.Data2, Data3: x.Data3, Data4: append([]byte(nil), x.Data4[:]...)}
	case *QualifiedName:
		out = &gua.QualifiedName{NamespaceIndex: x.NamespaceIndex, Name: x.Name}
	case *LocalizedText:
		out = genGpLocalizedText(*x)
	case *ExtensionObject:
		out, err = genGpExtensionObject(x)
	case *DataValue:
		out, err = genGpDataValue(x)
	case *Variant:
		out, err = genGpVariant(x)
	case *DiagnosticInfo:
		out = genGpDiagnosticInfo(x)
	}
	if err != nil {
		return reflect.Value{}, err
	}
	if out != nil {
		v := reflect.ValueOf(out)
		if v.Kind() == reflect.Pointer && v.IsNil() {
			return reflect.Zero(dt), nil
		}
		if !v.Type().AssignableTo(dt) {
			return reflect.Value{}, fmt.Errorf("%s converts to %s, gopcua wants %s", src.Type(), v.Type(), dt)
		}
		return v, nil
	}
	switch src.Kind() {
	case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint8,
		reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64, reflect.String:
		if !src.Type().ConvertibleTo(dt) || dt.Kind() == reflect.Pointer {
			return reflect.Value{}, fmt.Errorf("%s does not convert to %s", src.Type(), dt)
		}
		return src.Convert(dt), nil
	case reflect.Slice:
		if dt.Kind() != reflect.Slice {
			return reflect.Value{}, fmt.Errorf("%s vs %s", src.Type(), dt)
		}
		if src.IsNil() {
			return reflect.Zero(dt), nil
		}
		if src.Type().Elem().Kind() == reflect.Uint8 && dt.Elem().Kind() == reflect.Uint8 {
			return src.Convert(dt), nil
		}
		out := reflect.MakeSlice(dt, src.Len(), src.Len())
		for i := 0; i < src.Len(); i++ {
			v, err := genToGopcua(src.Index(i), dt.Elem())
			if err != nil {
				return reflect.Value{}, fmt.Errorf("[%d]: %w", i, err)
			}
			out.Index(i).Set(v)
		}
		return out, nil
	case reflect.Struct:
		st := dt
		if st.Kind() == reflect.Pointer {
			st = st.Elem()
		}
		if st.Kind() != reflect.Struct {
			return reflect.Value{}, fmt.Errorf("%s vs %s", src.Type(), dt)
		}
		var fields []int
		for i := 0; i < src.NumField(); i++ {
			if f := src.Type().Field(i); f.IsExported() && f.Type != rtPoolHeader {
				fields = append(fields, i)
			}
		}
		if len(fields) != st.NumField() {
			return reflect.Value{}, fmt.Errorf("%s has %d fields, gopcua's %s %d", src.Type(), len(fields), st, st.NumField())
		}
		out := reflect.New(st).Elem()
		for j, i := range fields {
			ours, theirs := src.Type().Field(i), st.Field(j)
			if !strings.EqualFold(ours.Name, theirs.Name) {
				return reflect.Value{}, fmt.Errorf("%s field %d is %s, gopcua's %s", src.Type(), j, ours.Name, theirs.Name)
			}
			v, err := genToGopcua(src.Field(i), theirs.Type)
			if err != nil {
				return reflect.Value{}, fmt.Errorf("%s.%s: %w", src.Type().Name(), ours.Name, err)
			}
			out.Field(j).Set(v)
		}
		if dt.Kind() == reflect.Pointer {
			return out.Addr(), nil
		}
		return out, nil
	}
	return reflect.Value{}, fmt.Errorf("%s not converted", src.Type())
}

// genCompareGopcua encodes s with both implementations and compares the bytes.
func genCompareGopcua(t *testing.T, s Structure) (compared bool) {
	t.Helper()
	e := NewEncoder(nil)
	s.Encode(e)
	ours := e.Bytes()
	gt, ok := genGopcuaType(s.BinaryEncodingID(), ours)
	if !ok {
		t.Logf("%T: gopcua does not know the type", s)
		return false
	}
	v, err := genToGopcua(reflect.ValueOf(s), gt)
	if err != nil {
		t.Logf("%T: not compared: %v", s, err)
		return false
	}
	theirs, err := gua.Encode(v.Interface())
	if err != nil {
		t.Fatalf("%T: gopcua encode: %v", s, err)
	}
	if !bytes.Equal(ours, theirs) {
		t.Fatalf("%T differs from gopcua\n ours   %x\n gopcua %x", s, ours, theirs)
	}
	return true
}

// TestGenGopcuaAllTypes compares the encoding of every generated structure, filled
// with non-zero values, with gopcua's.
func TestGenGopcuaAllTypes(t *testing.T) {
	compared, skipped := 0, []string{}
	for _, info := range genStructInfos() {
		if genCompareGopcua(t, genFilled(info)) {
			compared++
		} else {
			skipped = append(skipped, info.Name)
		}
	}
	t.Logf("%d structures encode byte for byte like gopcua's; %d not compared: %v", compared, len(skipped), skipped)
	if compared < 250 {
		t.Fatalf("only %d structures compared with gopcua", compared)
	}
	for _, name := range genServiceMessageNames {
		for _, s := range skipped {
			if s == name {
				t.Errorf("service message %s was not compared with gopcua", name)
			}
		}
	}
}

// genServiceMessageNames are the service messages the gateway uses.
var genServiceMessageNames = []string{
	"OpenSecureChannelRequest", "OpenSecureChannelResponse", "CloseSecureChannelRequest",
	"GetEndpointsRequest", "GetEndpointsResponse", "FindServersRequest", "FindServersResponse",
	"CreateSessionRequest", "CreateSessionResponse", "ActivateSessionRequest", "ActivateSessionResponse",
	"CloseSessionRequest", "CloseSessionResponse", "CancelRequest", "CancelResponse",
	"BrowseRequest", "BrowseResponse", "BrowseNextRequest", "BrowseNextResponse",
	"TranslateBrowsePathsToNodeIdsRequest", "TranslateBrowsePathsToNodeIdsResponse",
	"RegisterNodesRequest", "RegisterNodesResponse", "ReadRequest", "ReadResponse",
	"WriteRequest", "WriteResponse", "HistoryReadRequest", "HistoryReadResponse",
	"CallRequest", "CallResponse", "CreateSubscriptionRequest", "CreateSubscriptionResponse",
	"ModifySubscriptionRequest", "ModifySubscriptionResponse", "SetPublishingModeRequest",
	"SetPublishingModeResponse", "CreateMonitoredItemsRequest", "CreateMonitoredItemsResponse",
	"ModifyMonitoredItemsRequest", "ModifyMonitoredItemsResponse", "SetMonitoringModeRequest",
	"SetMonitoringModeResponse", "SetTriggeringRequest", "SetTriggeringResponse",
	"DeleteMonitoredItemsRequest", "DeleteMonitoredItemsResponse", "PublishRequest", "PublishResponse",
	"RepublishRequest", "RepublishResponse", "TransferSubscriptionsRequest", "TransferSubscriptionsResponse",
	"DeleteSubscriptionsRequest", "DeleteSubscriptionsResponse", "ServiceFault",
	"DataChangeNotification", "EventNotificationList", "StatusChangeNotification",
	"AnonymousIdentityToken", "UserNameIdentityToken", "X509IdentityToken",
	"DataChangeFilter", "EventFilter", "AggregateFilter", "ReadRawModifiedDetails",
}
