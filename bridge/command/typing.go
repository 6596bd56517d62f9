package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/uagate/gateway/jsonenc"
	"github.com/uagate/gateway/uastack/client"
	"github.com/uagate/gateway/uastack/ua"
)

// Values take the node's type: a JSON value is decoded as the built-in
// type of the node's DataType (or of a method argument's), so 7 becomes an
// Int16 for an Int16 node; a value that is not of that type (a fraction for
// an integer, a number out of range, a string for a number, a Variant of
// another type) is refused with KindTypeMismatch, never converted.

// maxArrayLength bounds an array in a request (the payload bounds it too).
const maxArrayLength = 1 << 16

// wellKnown are the DataTypes of namespace 0 outside the built-in range that
// are common in PLCs, with the built-in type they are encoded as.
var wellKnown = map[uint32]ua.TypeID{
	ua.ID_Duration:    ua.TypeDouble,
	ua.ID_UtcTime:     ua.TypeDateTime,
	ua.ID_LocaleId:    ua.TypeString,
	ua.ID_Enumeration: ua.TypeInt32,
	ua.ID_Image:       ua.TypeByteString,
	ua.ID_Structure:   ua.TypeExtensionObject,
}

// abstract DataTypes: any of several built-in types fits; the value read or
// the request's type decides.
var abstract = map[uint32]bool{ua.ID_BaseDataType: true, ua.ID_Number: true, ua.ID_Integer: true, ua.ID_UInteger: true}

// maxSupertypes bounds the walk up a DataType's supertypes.
const maxSupertypes = 16

// builtinType finds the built-in type values of DataType dt are encoded as:
// directly for namespace 0, else by its supertypes (browsed). An abstract
// type takes the type the request names, else that of old (the value read).
func builtinType(ctx context.Context, c *client.Client, dt ua.NodeID, old *ua.Variant, want string) (ua.TypeID, error) {
	for range maxSupertypes {
		if dt.Namespace == 0 && dt.Type == ua.IDNumeric {
			id := dt.Numeric
			switch {
			case id >= uint32(ua.TypeBoolean) && id <= uint32(ua.TypeDiagnosticInfo):
				return ua.TypeID(id), nil
			case abstract[id]:
				if want != "" {
					t, ok := TypeByName(want)
					if !ok {
						return 0, refuse(KindInvalid, ua.StatusBadInvalidArgument, "type %q is not a built-in type name (Boolean, Int16, Double, String, …)", want)
					}
					return t, nil
				}
				if !old.IsNull() {
					return old.Type(), nil
				}
				return 0, refuse(KindTypeMismatch, ua.StatusBadTypeMismatch, "the node's DataType %s is abstract and it has no value to take the type from: name it (\"type\": \"Double\")", dt)
			}
			if t, ok := wellKnown[id]; ok {
				return t, nil
			}
		}
		super, err := supertype(ctx, c, dt)
		if err != nil {
			return 0, err
		}
		if super.IsNull() {
			break
		}
		if super.Namespace == 0 && super.Type == ua.IDNumeric && super.Numeric == ua.ID_Enumeration {
			return ua.TypeInt32, nil
		}
		dt = super
	}
	if !old.IsNull() {
		return old.Type(), nil
	}
	return 0, refuse(KindTypeMismatch, ua.StatusBadTypeMismatch, "cannot tell the built-in type of DataType %s", dt)
}

// supertype browses the supertype of a DataType (null at the root).
func supertype(ctx context.Context, c *client.Client, dt ua.NodeID) (ua.NodeID, error) {
	resp, err := c.Browse(ctx, &ua.BrowseRequest{RequestedMaxReferencesPerNode: 1, NodesToBrowse: []ua.BrowseDescription{{
		NodeID: dt, BrowseDirection: ua.BrowseDirectionInverse, ReferenceTypeID: ua.NewNumericNodeID(0, ua.ID_HasSubtype),
		IncludeSubtypes: true, ResultMask: uint32(ua.BrowseResultMaskAll)}}})
	if err != nil {
		return ua.NodeID{}, upstream("Browse", err)
	}
	if len(resp.Results) != 1 || len(resp.Results[0].References) == 0 {
		return ua.NodeID{}, nil
	}
	return resp.Results[0].References[0].NodeID.NodeID, nil
}

// TypeByName returns the built-in type named s (case-insensitive).
func TypeByName(s string) (ua.TypeID, bool) {
	for t := ua.TypeBoolean; t <= ua.TypeDiagnosticInfo; t++ {
		if strings.EqualFold(t.String(), s) {
			return t, true
		}
	}
	return 0, false
}

// isArrayRank reports whether a value of the value rank is an array: 1 or
// more dimensions; for the ranks that allow both (Any -2, ScalarOrOneDimension
// -3, OneOrMoreDimensions 0 is always an array), the JSON decides.
func isArrayRank(rank int32, raw []byte) bool {
	switch {
	case rank >= 0:
		return true
	case rank == -1:
		return false
	}
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '['
}

// decodeValue decodes raw as a value of type t (an array with array),
// strictly: see the file comment. what names it in errors ("value",
// "argument 2 (b)").
func decodeValue(raw json.RawMessage, t ua.TypeID, array bool, ns []string, what string) (ua.Variant, error) {
	raw = bytes.TrimSpace(raw)
	d := jsonenc.NewDecoder(jsonenc.DecoderOptions{NamespaceURIs: ns, MaxArrayLength: maxArrayLength, MaxDepth: 16})
	if isNull(raw) {
		return ua.Variant{}, mismatch("%s is null: want a %s", what, typeText(t, array))
	}
	if raw[0] == '{' && isVariantObject(raw) {
		v, err := d.DecodeVariant(raw)
		if err != nil {
			return ua.Variant{}, mismatch("%s: not an OPC UA JSON Variant: %s", what, trimErr(err))
		}
		if v.Type() != t || v.IsArray() != array {
			return ua.Variant{}, mismatch("%s is a %s Variant; the node takes a %s", what, variantText(&v), typeText(t, array))
		}
		return v, nil
	}
	if array {
		if raw[0] != '[' {
			return ua.Variant{}, mismatch("%s: want an array of %s", what, t)
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return ua.Variant{}, mismatch("%s: %v", what, err)
		}
		for i, e := range elems {
			if err := checkShape(bytes.TrimSpace(e), t); err != nil {
				return ua.Variant{}, mismatch("%s[%d]: %v", what, i, err)
			}
		}
	} else if err := checkShape(raw, t); err != nil {
		return ua.Variant{}, mismatch("%s: %v", what, err)
	}
	v, err := d.DecodeValue(raw, t, array)
	if err != nil {
		return ua.Variant{}, mismatch("%s: not a %s: %s", what, typeText(t, array), trimErr(err))
	}
	return v, nil
}

// checkShape refuses JSON of the wrong kind for t that the Part 6 decoder
// would take (a decimal string for an Int16, null for anything).
func checkShape(raw []byte, t ua.TypeID) error {
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("null: want a %s", t)
	}
	c := raw[0]
	isNum := c == '-' || (c >= '0' && c <= '9')
	isStr := c == '"'
	switch t {
	case ua.TypeBoolean:
		if string(raw) != "true" && string(raw) != "false" {
			return fmt.Errorf("%s is not a Boolean (true or false)", clip(raw))
		}
	case ua.TypeSByte, ua.TypeByte, ua.TypeInt16, ua.TypeUInt16, ua.TypeInt32, ua.TypeUInt32:
		if !isNum {
			return fmt.Errorf("%s is not a number: want a %s", clip(raw), t)
		}
	case ua.TypeInt64, ua.TypeUInt64:
		if !isNum && !isStr {
			return fmt.Errorf("%s is not a number: want a %s", clip(raw), t)
		}
	case ua.TypeFloat, ua.TypeDouble:
		if !isNum && string(raw) != `"NaN"` && string(raw) != `"Infinity"` && string(raw) != `"-Infinity"` {
			return fmt.Errorf("%s is not a number: want a %s", clip(raw), t)
		}
	case ua.TypeString, ua.TypeDateTime, ua.TypeGuid, ua.TypeByteString, ua.TypeXmlElement:
		if !isStr {
			return fmt.Errorf("%s is not a string: want a %s", clip(raw), t)
		}
	}
	return nil
}

// isVariantObject reports whether a JSON object is a Variant: it has UaType
// (1.05) or Type and Body (1.04).
func isVariantObject(raw []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) != nil {
		return false
	}
	if _, ok := probe["UaType"]; ok {
		return true
	}
	_, typ := probe["Type"]
	_, body := probe["Body"]
	return typ && body
}

func mismatch(format string, args ...any) *refusal {
	return refuse(KindTypeMismatch, ua.StatusBadTypeMismatch, format, args...)
}

func typeText(t ua.TypeID, array bool) string {
	if array {
		return t.String() + " array"
	}
	return t.String()
}

func variantText(v *ua.Variant) string { return typeText(v.Type(), v.IsArray()) }

func clip(raw []byte) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "…"
	}
	return string(raw)
}

func trimErr(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "jsonenc: ")
	return strings.TrimPrefix(s, "decoding: ")
}

// upstream makes the refusal of a service call that failed.
func upstream(service string, err error) *refusal {
	var sc ua.StatusCode
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return refuse(KindTimeout, ua.StatusBadTimeout, "%s: the server did not answer within the endpoint's request timeout", service)
	case errors.Is(err, context.Canceled):
		return refuse(KindUnavailable, ua.StatusBadShutdown, "%s: the gateway is stopping", service)
	case errors.As(err, &sc):
		return refuse(KindUpstream, sc, "%s: %v", service, err)
	}
	return refuse(KindUpstream, ua.StatusBadCommunicationError, "%s: %v", service, err)
}

// argument is the declared type of a method's input argument.
type argument struct {
	name string
	dt   ua.NodeID
	rank int32
}

// inputArguments reads the InputArguments property of a method (none when
// it has none).
func inputArguments(ctx context.Context, c *client.Client, method ua.NodeID) ([]argument, error) {
	tr, err := c.TranslateBrowsePathsToNodeIDs(ctx, &ua.TranslateBrowsePathsToNodeIDsRequest{BrowsePaths: []ua.BrowsePath{{
		StartingNode: method,
		RelativePath: ua.RelativePath{Elements: []ua.RelativePathElement{{
			ReferenceTypeID: ua.NewNumericNodeID(0, ua.ID_HasProperty), IncludeSubtypes: true,
			TargetName: ua.NewQualifiedName(0, "InputArguments")}}},
	}}})
	if err != nil {
		return nil, upstream("TranslateBrowsePathsToNodeIds", err)
	}
	if len(tr.Results) != 1 || tr.Results[0].StatusCode.IsBad() || len(tr.Results[0].Targets) == 0 {
		return nil, nil // no InputArguments: a method without inputs
	}
	prop, err := tr.Results[0].Targets[0].TargetID.Resolve(c.Namespaces())
	if err != nil {
		return nil, refuse(KindUpstream, ua.StatusBadNodeIdUnknown, "the method's InputArguments: %v", err)
	}
	vals, err := c.ReadValues(ctx, prop)
	if err != nil {
		return nil, upstream("Read", err)
	}
	if len(vals) != 1 || vals[0].Status.IsBad() {
		return nil, refuse(KindUpstream, ua.StatusBadNodeIdUnknown, "reading the method's InputArguments failed")
	}
	var eos []ua.ExtensionObject
	switch x := vals[0].Value.Value().(type) {
	case []ua.ExtensionObject:
		eos = x
	case nil:
		return nil, nil
	default:
		return nil, refuse(KindUpstream, ua.StatusBadTypeMismatch, "the method's InputArguments are a %T, not Arguments", x)
	}
	out := make([]argument, len(eos))
	for i := range eos {
		a, ok := eos[i].Value.(*ua.Argument)
		if !ok {
			return nil, refuse(KindUpstream, ua.StatusBadTypeMismatch, "input argument %d of the method is not an Argument", i)
		}
		out[i] = argument{name: a.Name, dt: a.DataType, rank: a.ValueRank}
	}
	return out, nil
}
