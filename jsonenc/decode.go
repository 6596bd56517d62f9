package jsonenc

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/uagate/gateway/uastack/ua"
)

// ErrDecode wraps every error of the Decoder that is not a syntax error.
var ErrDecode = errors.New("jsonenc: cannot decode")

// DecoderOptions configure a Decoder.
type DecoderOptions struct {
	// NamespaceURIs maps nsu= URIs back to namespace indexes (index i has
	// URI NamespaceURIs[i]; namespace 0 is always the UA namespace).
	NamespaceURIs []string
	// ServerURIs maps svu= URIs back to server indexes.
	ServerURIs []string
	// The limits below are checked while the input is parsed, before the
	// value they bound is built, so a hostile document fails with a typed error
	// (ErrTooDeep, ErrLimitExceeded) having allocated little.

	// MaxDepth bounds nesting (default DefaultMaxDepth).
	MaxDepth int
	// MaxArrayLength bounds each array and matrix, and the members of each
	// object (default 1<<20).
	MaxArrayLength int
	// MaxStringLength bounds each string, member names included, in bytes as
	// written in the input (default DefaultMaxStringLength).
	MaxStringLength int
	// MaxValues bounds the JSON values of one document, all levels together
	// (default DefaultMaxValues): a parsed value takes 72 bytes, and up to five
	// times that while its array is being parsed, so this bounds the memory a
	// document of many tiny values ([0,0,0,...]) takes, to some 190 MB by
	// default.
	MaxValues int
	// MaxInputSize bounds the document, in bytes (default DefaultMaxInputSize).
	MaxInputSize int
}

// Defaults of DecoderOptions. A string may hold a base64 ByteString of the binary
// codec's 16 MiB; a document, the largest message the binary codec accepts.
const (
	DefaultMaxStringLength = 24 << 20
	DefaultMaxValues       = 1 << 19
	DefaultMaxInputSize    = 32 << 20
)

// ErrLimitExceeded is returned when a document exceeds one of the
// DecoderOptions limits (length of an array, an object or a string, number of
// values, input size). It wraps ua.StatusBadEncodingLimitsExceeded.
var ErrLimitExceeded = fmt.Errorf("jsonenc: decoding limit exceeded: %w", ua.StatusBadEncodingLimitsExceeded)

// Decoder decodes OPC UA JSON in every form decoders are expected to accept
// (Part 6 Annex H.1): Compact, Verbose and the 1.04 Reversible form, plus the
// 1.04 NonReversible form where the type is given. It never panics on bad
// input and allocates freely: it is not for the hot path. A Decoder is safe
// for concurrent use once set up.
type Decoder struct {
	opts DecoderOptions
}

// NewDecoder returns a Decoder for opts.
func NewDecoder(opts DecoderOptions) *Decoder {
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	if opts.MaxArrayLength <= 0 {
		opts.MaxArrayLength = 1 << 20
	}
	if opts.MaxStringLength <= 0 {
		opts.MaxStringLength = DefaultMaxStringLength
	}
	if opts.MaxValues <= 0 {
		opts.MaxValues = DefaultMaxValues
	}
	if opts.MaxInputSize <= 0 {
		opts.MaxInputSize = DefaultMaxInputSize
	}
	return &Decoder{opts: opts}
}

func (d *Decoder) parse(data []byte) (node, error) {
	return parseJSON(data, parseLimits{
		depth: d.opts.MaxDepth, array: d.opts.MaxArrayLength, str: d.opts.MaxStringLength,
		values: d.opts.MaxValues, input: d.opts.MaxInputSize,
	})
}

func errf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDecode, fmt.Sprintf(format, args...))
}

// DecodeVariant decodes {"UaType":t,"Value":v[,"Dimensions":[..]]} or the
// 1.04 {"Type":t,"Body":v[,"Dimensions":..]}; null and {} are the null Variant.
func (d *Decoder) DecodeVariant(data []byte) (ua.Variant, error) {
	n, err := d.parse(data)
	if err != nil {
		return ua.Variant{}, err
	}
	return d.variant(&n, 0)
}

// DecodeDataValue decodes a DataValue in the 1.05 or 1.04 form.
func (d *Decoder) DecodeDataValue(data []byte) (ua.DataValue, error) {
	n, err := d.parse(data)
	if err != nil {
		return ua.DataValue{}, err
	}
	var dv ua.DataValue
	err = d.dataValue(&n, &dv, 0, 0)
	return dv, err
}

// DecodeValue decodes a value of built-in type t without type information in
// the JSON: the collapsed/RawData form of PubSub fields and the 1.04
// NonReversible form. array selects a one-dimensional array or a matrix
// (1.05 {"Array","Dimensions"} or nested arrays).
func (d *Decoder) DecodeValue(data []byte, t ua.TypeID, array bool) (ua.Variant, error) {
	n, err := d.parse(data)
	if err != nil {
		return ua.Variant{}, err
	}
	return d.typedBody(&n, t, array, 0)
}

// DecodeNodeID decodes a NodeId: the string form (nsu= mapped through the
// namespace table; an unknown URI gives a String NodeId in namespace 0 holding
// the whole text, as Part 6 §5.4.2.10 says) or the 1.04 object form.
func (d *Decoder) DecodeNodeID(data []byte) (ua.NodeID, error) {
	n, err := d.parse(data)
	if err != nil {
		return ua.NodeID{}, err
	}
	return d.nodeID(&n)
}

// DecodeExpandedNodeID decodes an ExpandedNodeId (string or 1.04 object). An
// nsu= URI that is not in the namespace table is kept in NamespaceURI.
func (d *Decoder) DecodeExpandedNodeID(data []byte) (ua.ExpandedNodeID, error) {
	n, err := d.parse(data)
	if err != nil {
		return ua.ExpandedNodeID{}, err
	}
	return d.expandedNodeID(&n)
}

// DecodeQualifiedName decodes "Name", "nsu=<uri>;Name", "<uri>;Name",
// "<i>:Name" or the 1.04 object.
func (d *Decoder) DecodeQualifiedName(data []byte) (ua.QualifiedName, error) {
	n, err := d.parse(data)
	if err != nil {
		return ua.QualifiedName{}, err
	}
	return d.qualifiedName(&n)
}

// DecodeLocalizedText decodes {"Locale","Text"} or a plain string.
func (d *Decoder) DecodeLocalizedText(data []byte) (ua.LocalizedText, error) {
	n, err := d.parse(data)
	if err != nil {
		return ua.LocalizedText{}, err
	}
	return d.localizedText(&n)
}

// DecodeStatusCode decodes {"Code":n[,"Symbol":s]}, {} (Good) or a number.
func (d *Decoder) DecodeStatusCode(data []byte) (ua.StatusCode, error) {
	n, err := d.parse(data)
	if err != nil {
		return 0, err
	}
	return d.statusCode(&n)
}

// DecodeDateTime decodes an ISO 8601 string.
func (d *Decoder) DecodeDateTime(data []byte) (ua.DateTime, error) {
	n, err := d.parse(data)
	if err != nil {
		return 0, err
	}
	return d.dateTime(&n)
}

// DecodeDiagnosticInfo decodes a DiagnosticInfo object.
func (d *Decoder) DecodeDiagnosticInfo(data []byte) (*ua.DiagnosticInfo, error) {
	n, err := d.parse(data)
	if err != nil {
		return nil, err
	}
	return d.diagnosticInfo(&n, 0)
}

// DecodeExtensionObject decodes an ExtensionObject with a UA Binary or XML
// body (1.05 UaEncoding/UaBody or 1.04 Encoding/Body). Bodies of registered
// types are decoded into their Go type.
func (d *Decoder) DecodeExtensionObject(data []byte) (*ua.ExtensionObject, error) {
	n, err := d.parse(data)
	if err != nil {
		return nil, err
	}
	return d.extensionObject(&n)
}

// ---- primitives ----

func (d *Decoder) boolean(n *node) (bool, error) {
	switch n.kind {
	case kBool:
		return n.b, nil
	case kNull:
		return false, nil
	}
	return false, errf("Boolean: got %v", n.kind)
}

// integer parses a JSON number or a decimal string as an integer in
// [lo, hi]; fractions are rejected.
func integer(n *node, lo int64, hi uint64, what string) (int64, uint64, error) {
	var s string
	switch n.kind {
	case kNum, kStr:
		s = n.s
	case kNull:
		return 0, 0, nil
	default:
		return 0, 0, errf("%s: got %v", what, n.kind)
	}
	if strings.HasPrefix(s, "-") {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < lo {
			if f, ok := exactFloatInt(s); ok && f >= float64(lo) && f <= 0 {
				return int64(f), uint64(int64(f)), nil
			}
			return 0, 0, errf("%s: %q is not an integer in range", what, s)
		}
		return v, uint64(v), nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > hi {
		if f, ok := exactFloatInt(s); ok && f >= 0 && f <= float64(hi) && f < 1<<63 {
			return int64(f), uint64(f), nil
		}
		return 0, 0, errf("%s: %q is not an integer in range", what, s)
	}
	return int64(v), v, nil
}

// exactFloatInt accepts integral numbers written with a fraction or exponent
// ("1.0", "1e3").
func exactFloatInt(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func float(n *node, bits int) (float64, error) {
	switch n.kind {
	case kNum:
		f, err := strconv.ParseFloat(n.s, bits)
		if err != nil {
			return 0, errf("Double: %q: %v", n.s, err)
		}
		return f, nil
	case kStr:
		switch n.s {
		case "NaN", "-NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		f, err := strconv.ParseFloat(n.s, bits)
		if err != nil {
			return 0, errf("Double: %q", n.s)
		}
		return f, nil
	case kNull:
		return 0, nil
	}
	return 0, errf("Double: got %v", n.kind)
}

func str(n *node, what string) (string, error) {
	switch n.kind {
	case kStr:
		return n.s, nil
	case kNull:
		return "", nil
	}
	return "", errf("%s: got %v", what, n.kind)
}

func (d *Decoder) dateTime(n *node) (ua.DateTime, error) {
	if n.kind == kNull {
		return 0, nil
	}
	if n.kind != kStr {
		return 0, errf("DateTime: got %v", n.kind)
	}
	t, ok := parseDateTime(n.s)
	if !ok {
		return 0, errf("DateTime: %q is not ISO 8601", n.s)
	}
	return t, nil
}

func guid(n *node) (ua.Guid, error) {
	if n.kind == kNull {
		return ua.Guid{}, nil
	}
	if n.kind != kStr {
		return ua.Guid{}, errf("Guid: got %v", n.kind)
	}
	g, err := ua.ParseGuid(n.s)
	if err != nil {
		return ua.Guid{}, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	return g, nil
}

func byteString(n *node) ([]byte, error) {
	if n.kind == kNull {
		return nil, nil
	}
	if n.kind != kStr {
		return nil, errf("ByteString: got %v", n.kind)
	}
	return decodeBase64(n.s)
}

func decodeBase64(s string) ([]byte, error) {
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
		s = strings.TrimRight(s, "=")
	}
	p, err := enc.DecodeString(s)
	if err != nil {
		return nil, errf("ByteString: invalid base64")
	}
	if p == nil {
		p = []byte{}
	}
	return p, nil
}

// ---- NodeId family ----

func (d *Decoder) nsIndex(uri string) (uint16, bool) {
	if uri == UANamespace {
		return 0, true
	}
	for i, u := range d.opts.NamespaceURIs {
		if u == uri && i > 0 && i <= math.MaxUint16 {
			return uint16(i), true
		}
	}
	return 0, false
}

func (d *Decoder) nodeID(n *node) (ua.NodeID, error) {
	switch n.kind {
	case kNull:
		return ua.NodeID{}, nil
	case kStr:
		x, err := ua.ParseExpandedNodeID(n.s)
		if err != nil {
			return ua.NodeID{}, fmt.Errorf("%w: %v", ErrDecode, err)
		}
		if x.ServerIndex != 0 {
			return ua.NodeID{}, errf("NodeId %q names a server", n.s)
		}
		if x.NamespaceURI != "" {
			ns, ok := d.nsIndex(x.NamespaceURI)
			if !ok {
				// Part 6 §5.4.2.10: an unknown URI leaves the whole text as a
				// String identifier in namespace 0.
				return ua.NewStringNodeID(0, n.s), nil
			}
			x.NodeID.Namespace = ns
		}
		return x.NodeID, nil
	case kObj:
		id, uri, err := d.legacyNodeID(n)
		if err != nil {
			return ua.NodeID{}, err
		}
		if uri != "" {
			ns, ok := d.nsIndex(uri)
			if !ok {
				return ua.NodeID{}, errf("NodeId namespace %q is not in the namespace table", uri)
			}
			id.Namespace = ns
		}
		return id, nil
	}
	return ua.NodeID{}, errf("NodeId: got %v", n.kind)
}

// legacyNodeID decodes the 1.04 object form; a Namespace given as a URI is
// returned separately.
func (d *Decoder) legacyNodeID(n *node) (ua.NodeID, string, error) {
	var id ua.NodeID
	var uri string
	idType := int64(0)
	if t := n.get("IdType"); t != nil {
		v, _, err := integer(t, 0, 3, "IdType")
		if err != nil {
			return id, "", err
		}
		idType = v
	}
	idn := n.get("Id")
	if idn == nil {
		idn = &node{}
	}
	switch idType {
	case 0:
		_, v, err := integer(idn, 0, math.MaxUint32, "NodeId Id")
		if err != nil {
			return id, "", err
		}
		id = ua.NewNumericNodeID(0, uint32(v))
	case 1:
		s, err := str(idn, "NodeId Id")
		if err != nil {
			return id, "", err
		}
		id = ua.NewStringNodeID(0, s)
	case 2:
		g, err := guid(idn)
		if err != nil {
			return id, "", err
		}
		id = ua.NewGuidNodeID(0, g)
	case 3:
		p, err := byteString(idn)
		if err != nil {
			return id, "", err
		}
		id = ua.NewOpaqueNodeID(0, p)
	}
	if ns := n.get("Namespace"); ns != nil {
		switch ns.kind {
		case kStr:
			uri = ns.s
		case kNull:
		default:
			_, v, err := integer(ns, 0, math.MaxUint16, "Namespace")
			if err != nil {
				return id, "", err
			}
			id.Namespace = uint16(v)
		}
	}
	return id, uri, nil
}

func (d *Decoder) expandedNodeID(n *node) (ua.ExpandedNodeID, error) {
	switch n.kind {
	case kNull:
		return ua.ExpandedNodeID{}, nil
	case kStr:
		s := n.s
		var server uint32
		if strings.HasPrefix(s, "svu=") {
			i := strings.IndexByte(s, ';')
			if i < 0 {
				return ua.ExpandedNodeID{}, errf("ExpandedNodeId %q: svu= without ';'", s)
			}
			uri := percentDecode(s[4:i])
			found := false
			for j, u := range d.opts.ServerURIs {
				if u == uri {
					server, found = uint32(j), true
					break
				}
			}
			if !found {
				return ua.NewExpandedNodeID(ua.NewStringNodeID(0, n.s)), nil
			}
			s = s[i+1:]
		}
		x, err := ua.ParseExpandedNodeID(s)
		if err != nil {
			return ua.ExpandedNodeID{}, fmt.Errorf("%w: %v", ErrDecode, err)
		}
		if server != 0 {
			x.ServerIndex = server
		}
		if x.NamespaceURI != "" && x.ServerIndex == 0 {
			if ns, ok := d.nsIndex(x.NamespaceURI); ok {
				x.NodeID.Namespace = ns
				x.NamespaceURI = ""
			}
		}
		return x, nil
	case kObj:
		id, uri, err := d.legacyNodeID(n)
		if err != nil {
			return ua.ExpandedNodeID{}, err
		}
		x := ua.ExpandedNodeID{NodeID: id}
		if uri != "" {
			if ns, ok := d.nsIndex(uri); ok {
				x.Namespace = ns
			} else {
				x.NamespaceURI = uri
			}
		}
		if su := n.get("ServerUri"); su != nil {
			switch su.kind {
			case kStr:
				found := false
				for j, u := range d.opts.ServerURIs {
					if u == su.s {
						x.ServerIndex, found = uint32(j), true
					}
				}
				if !found {
					return x, errf("ServerUri %q is not in the server table", su.s)
				}
			default:
				_, v, err := integer(su, 0, math.MaxUint32, "ServerUri")
				if err != nil {
					return x, err
				}
				x.ServerIndex = uint32(v)
			}
		}
		return x, nil
	}
	return ua.ExpandedNodeID{}, errf("ExpandedNodeId: got %v", n.kind)
}

func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (d *Decoder) qualifiedName(n *node) (ua.QualifiedName, error) {
	switch n.kind {
	case kNull:
		return ua.QualifiedName{}, nil
	case kStr:
		s := n.s
		if rest, ok := strings.CutPrefix(s, "nsu="); ok {
			i := strings.IndexByte(rest, ';')
			if i < 0 {
				return ua.QualifiedName{Name: s}, nil
			}
			if ns, ok := d.nsIndex(percentDecode(rest[:i])); ok {
				return ua.QualifiedName{NamespaceIndex: ns, Name: rest[i+1:]}, nil
			}
			return ua.QualifiedName{Name: s}, nil
		}
		// "<index>:Name" (abnormal form) or open62541's "<uri>;Name".
		if i := strings.IndexByte(s, ':'); i > 0 {
			if v, err := strconv.ParseUint(s[:i], 10, 16); err == nil {
				return ua.QualifiedName{NamespaceIndex: uint16(v), Name: s[i+1:]}, nil
			}
		}
		if i := strings.IndexByte(s, ';'); i > 0 {
			if ns, ok := d.nsIndex(s[:i]); ok {
				return ua.QualifiedName{NamespaceIndex: ns, Name: s[i+1:]}, nil
			}
		}
		return ua.QualifiedName{Name: s}, nil
	case kObj:
		var q ua.QualifiedName
		if nm := n.get("Name"); nm != nil {
			s, err := str(nm, "QualifiedName Name")
			if err != nil {
				return q, err
			}
			q.Name = s
		}
		if u := n.get("Uri"); u != nil {
			switch u.kind {
			case kStr:
				ns, ok := d.nsIndex(u.s)
				if !ok {
					return q, errf("QualifiedName Uri %q is not in the namespace table", u.s)
				}
				q.NamespaceIndex = ns
			default:
				_, v, err := integer(u, 0, math.MaxUint16, "QualifiedName Uri")
				if err != nil {
					return q, err
				}
				q.NamespaceIndex = uint16(v)
			}
		}
		return q, nil
	}
	return ua.QualifiedName{}, errf("QualifiedName: got %v", n.kind)
}

func (d *Decoder) localizedText(n *node) (ua.LocalizedText, error) {
	switch n.kind {
	case kNull:
		return ua.LocalizedText{}, nil
	case kStr:
		return ua.LocalizedText{Text: n.s}, nil
	case kObj:
		var l ua.LocalizedText
		var err error
		if x := n.get("Locale"); x != nil {
			if l.Locale, err = str(x, "Locale"); err != nil {
				return l, err
			}
		}
		if x := n.get("Text"); x != nil {
			if l.Text, err = str(x, "Text"); err != nil {
				return l, err
			}
		}
		return l, nil
	}
	return ua.LocalizedText{}, errf("LocalizedText: got %v", n.kind)
}

func (d *Decoder) statusCode(n *node) (ua.StatusCode, error) {
	switch n.kind {
	case kNull:
		return 0, nil
	case kNum, kStr:
		_, v, err := integer(n, 0, math.MaxUint32, "StatusCode")
		return ua.StatusCode(v), err
	case kObj:
		c := n.get("Code")
		if c == nil {
			return 0, nil
		}
		_, v, err := integer(c, 0, math.MaxUint32, "StatusCode Code")
		return ua.StatusCode(v), err
	}
	return 0, errf("StatusCode: got %v", n.kind)
}

func (d *Decoder) diagnosticInfo(n *node, depth int) (*ua.DiagnosticInfo, error) {
	if n.kind == kNull {
		return nil, nil
	}
	if n.kind != kObj {
		return nil, errf("DiagnosticInfo: got %v", n.kind)
	}
	if depth > d.opts.MaxDepth {
		return nil, ErrTooDeep
	}
	di := &ua.DiagnosticInfo{}
	ints := []struct {
		key  string
		bit  byte
		dest *int32
	}{
		{"SymbolicId", ua.DiagHasSymbolicID, &di.SymbolicID},
		{"NamespaceUri", ua.DiagHasNamespaceURI, &di.NamespaceURI},
		{"Locale", ua.DiagHasLocale, &di.Locale},
		{"LocalizedText", ua.DiagHasLocalizedText, &di.LocalizedText},
	}
	for _, f := range ints {
		if x := n.get(f.key); x != nil && x.kind != kNull {
			v, _, err := integer(x, math.MinInt32, math.MaxInt32, f.key)
			if err != nil {
				return nil, err
			}
			*f.dest = int32(v)
			di.Mask |= f.bit
		}
	}
	if x := n.get("AdditionalInfo"); x != nil && x.kind != kNull {
		s, err := str(x, "AdditionalInfo")
		if err != nil {
			return nil, err
		}
		di.AdditionalInfo = s
		di.Mask |= ua.DiagHasAdditionalInfo
	}
	if x := n.get("InnerStatusCode"); x != nil && x.kind != kNull {
		s, err := d.statusCode(x)
		if err != nil {
			return nil, err
		}
		di.InnerStatusCode = s
		di.Mask |= ua.DiagHasInnerStatusCode
	}
	if x := n.get("InnerDiagnosticInfo"); x != nil && x.kind != kNull {
		inner, err := d.diagnosticInfo(x, depth+1)
		if err != nil {
			return nil, err
		}
		di.InnerDiagnosticInfo = inner
		di.Mask |= ua.DiagHasInnerDiagnosticInfo
	}
	return di, nil
}

func (d *Decoder) extensionObject(n *node) (*ua.ExtensionObject, error) {
	if n.kind == kNull {
		return nil, nil
	}
	if n.kind != kObj {
		return nil, errf("ExtensionObject: got %v", n.kind)
	}
	if len(n.keys) == 0 {
		return &ua.ExtensionObject{}, nil
	}
	var typeNode, encNode, bodyNode *node
	legacy := false
	if t := n.get("UaTypeId"); t != nil {
		typeNode, encNode, bodyNode = t, n.get("UaEncoding"), n.get("UaBody")
	} else if t := n.get("TypeId"); t != nil {
		legacy = true
		typeNode, encNode, bodyNode = t, n.get("Encoding"), n.get("Body")
	} else if enc := n.get("UaEncoding"); enc != nil {
		// Compact leaves a null UaTypeId out, as every null NodeId.
		typeNode, encNode, bodyNode = &node{kind: kNull}, enc, n.get("UaBody")
	} else {
		return nil, errf("ExtensionObject without UaTypeId")
	}
	typeID, err := d.expandedNodeID(typeNode)
	if err != nil {
		return nil, err
	}
	enc := int64(0)
	if encNode != nil {
		if encNode.kind == kStr { // OPC Publisher writes "Json"/"Binary"/"Xml"
			switch encNode.s {
			case "Binary", "UA Binary":
				enc = 1
			case "Xml", "XML":
				enc = 2
			}
		} else if enc, _, err = integer(encNode, 0, 2, "UaEncoding"); err != nil {
			return nil, err
		}
	}
	if enc == 0 {
		return d.jsonBodied(n, bodyNode, typeID, legacy)
	}
	if bodyNode == nil {
		return nil, errf("ExtensionObject without body")
	}
	var body []byte
	if enc == 2 && bodyNode.kind == kStr && strings.HasPrefix(strings.TrimSpace(bodyNode.s), "<") {
		body = []byte(bodyNode.s) // .NET writes XML text, not base64
	} else if body, err = byteString(bodyNode); err != nil {
		return nil, err
	}
	eo := &ua.ExtensionObject{TypeID: typeID, Encoding: byte(enc), Body: body}
	// 1.05 carries the DataType id; the binary body is decoded through the
	// encoding id.
	if enc == 1 && typeID.ServerIndex == 0 && typeID.NamespaceURI == "" && typeID.Namespace == 0 && typeID.Type == ua.IDNumeric {
		info, ok := ua.TypeByEncodingID(typeID.Numeric)
		if !ok && !legacy {
			info, ok = ua.TypeByDataTypeID(typeID.Numeric)
		}
		if ok {
			eo.TypeID = ua.NewExpandedNodeID(ua.NewNumericNodeID(0, info.BinaryEncodingID))
			v := info.New()
			bd := ua.NewDecoder(body, nil)
			v.Decode(bd)
			if err := bd.Err(); err != nil {
				return nil, fmt.Errorf("%w: ExtensionObject %s body: %v", ErrDecode, info.Name, err)
			}
			eo.Value, eo.Body = v, nil
		}
	}
	return eo, nil
}

// ---- Variant and DataValue ----

// variant decodes a Variant object (1.05 or 1.04).
func (d *Decoder) variant(n *node, depth int) (ua.Variant, error) {
	switch n.kind {
	case kNull:
		return ua.Variant{}, nil
	case kObj:
	default:
		return ua.Variant{}, errf("Variant: got %v, want an object with UaType", n.kind)
	}
	if depth > d.opts.MaxDepth {
		return ua.Variant{}, ErrTooDeep
	}
	typeKey, valueKey := "UaType", "Value"
	if n.get("UaType") == nil && n.get("Type") != nil {
		typeKey, valueKey = "Type", "Body"
	}
	return d.variantMembers(n, typeKey, valueKey, depth)
}

func (d *Decoder) variantMembers(n *node, typeKey, valueKey string, depth int) (ua.Variant, error) {
	tn := n.get(typeKey)
	if tn == nil || tn.kind == kNull {
		return ua.Variant{}, nil
	}
	var t ua.TypeID
	if tn.kind == kStr { // OPC Publisher's reversible form names the type
		for i := ua.TypeID(1); i <= ua.TypeDiagnosticInfo; i++ {
			if strings.EqualFold(i.String(), tn.s) {
				t = i
			}
		}
		if t == 0 {
			return ua.Variant{}, errf("%s %q", typeKey, tn.s)
		}
	} else {
		v, _, err := integer(tn, 0, uint64(ua.TypeDiagnosticInfo), typeKey)
		if err != nil {
			return ua.Variant{}, err
		}
		t = ua.TypeID(v)
	}
	if t == ua.TypeNull {
		return ua.Variant{}, nil
	}
	vn := n.get(valueKey)
	if vn == nil || vn.kind == kNull {
		return nullOf(t), nil
	}
	if vn.kind == kArr {
		arr, err := d.typedArrayRaw(vn, t, depth)
		if err != nil {
			return ua.Variant{}, err
		}
		if dn := n.get("Dimensions"); dn != nil && dn.kind != kNull {
			return d.applyDims(arr, dn)
		}
		return ua.NewVariant(arr)
	}
	if t == ua.TypeVariant {
		return ua.Variant{}, errf("a Variant cannot hold a scalar Variant")
	}
	return d.typedScalar(vn, t, depth)
}

// nullOf returns the Variant a missing Value stands for: the NULL (or
// default) value of type t.
func nullOf(t ua.TypeID) ua.Variant {
	var v ua.Variant
	switch t {
	case ua.TypeBoolean:
		v.SetBoolean(false)
	case ua.TypeSByte:
		v.SetSByte(0)
	case ua.TypeByte:
		v.SetByte(0)
	case ua.TypeInt16:
		v.SetInt16(0)
	case ua.TypeUInt16:
		v.SetUInt16(0)
	case ua.TypeInt32:
		v.SetInt32(0)
	case ua.TypeUInt32:
		v.SetUInt32(0)
	case ua.TypeInt64:
		v.SetInt64(0)
	case ua.TypeUInt64:
		v.SetUInt64(0)
	case ua.TypeFloat:
		v.SetFloat(0)
	case ua.TypeDouble:
		v.SetDouble(0)
	case ua.TypeString:
		v.SetString("")
	case ua.TypeXmlElement:
		v.SetXmlElement("")
	case ua.TypeDateTime:
		v.SetDateTime(0)
	case ua.TypeStatusCode:
		v.SetStatusCode(0)
	case ua.TypeGuid:
		v = ua.MustVariant(ua.Guid{})
	case ua.TypeByteString:
		v = ua.MustVariant([]byte(nil))
	case ua.TypeNodeID:
		v = ua.MustVariant(ua.NodeID{})
	case ua.TypeExpandedNodeID:
		v = ua.MustVariant(ua.ExpandedNodeID{})
	case ua.TypeQualifiedName:
		v = ua.MustVariant(ua.QualifiedName{})
	case ua.TypeLocalizedText:
		v = ua.MustVariant(ua.LocalizedText{})
	case ua.TypeExtensionObject:
		v = ua.MustVariant(&ua.ExtensionObject{})
	case ua.TypeDataValue:
		v = ua.MustVariant(&ua.DataValue{})
	case ua.TypeDiagnosticInfo:
		v = ua.MustVariant(&ua.DiagnosticInfo{})
	}
	return v
}

// applyDims makes a matrix of the flat slice arr (from typedArrayRaw).
func (d *Decoder) applyDims(arr any, dn *node) (ua.Variant, error) {
	if dn.kind != kArr {
		return ua.Variant{}, errf("Dimensions: got %v", dn.kind)
	}
	if len(dn.vals) < 2 {
		return ua.NewVariant(arr)
	}
	dims := make([]int32, len(dn.vals))
	n := 1
	for i := range dn.vals {
		x, _, err := integer(&dn.vals[i], 1, math.MaxInt32, "Dimensions")
		if err != nil {
			return ua.Variant{}, err
		}
		if x <= 0 || int64(n)*x > int64(d.opts.MaxArrayLength) {
			return ua.Variant{}, errf("Dimensions %d out of range", x)
		}
		dims[i] = int32(x)
		n *= int(x)
	}
	m, err := ua.NewMatrixVariant(arr, dims)
	if err != nil {
		return ua.Variant{}, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	return m, nil
}

// typedScalar decodes the JSON of one value of type t into a scalar Variant.
func (d *Decoder) typedScalar(n *node, t ua.TypeID, depth int) (ua.Variant, error) {
	var v ua.Variant
	var err error
	switch t {
	case ua.TypeBoolean:
		var b bool
		b, err = d.boolean(n)
		v.SetBoolean(b)
	case ua.TypeSByte:
		var x int64
		x, _, err = integer(n, math.MinInt8, math.MaxInt8, "SByte")
		v.SetSByte(int8(x))
	case ua.TypeByte:
		var x uint64
		_, x, err = integer(n, 0, math.MaxUint8, "Byte")
		v.SetByte(byte(x))
	case ua.TypeInt16:
		var x int64
		x, _, err = integer(n, math.MinInt16, math.MaxInt16, "Int16")
		v.SetInt16(int16(x))
	case ua.TypeUInt16:
		var x uint64
		_, x, err = integer(n, 0, math.MaxUint16, "UInt16")
		v.SetUInt16(uint16(x))
	case ua.TypeInt32:
		var x int64
		x, _, err = integer(n, math.MinInt32, math.MaxInt32, "Int32")
		v.SetInt32(int32(x))
	case ua.TypeUInt32:
		var x uint64
		_, x, err = integer(n, 0, math.MaxUint32, "UInt32")
		v.SetUInt32(uint32(x))
	case ua.TypeInt64:
		var x int64
		x, _, err = integer(n, math.MinInt64, math.MaxInt64, "Int64")
		v.SetInt64(x)
	case ua.TypeUInt64:
		var x uint64
		_, x, err = integer(n, 0, math.MaxUint64, "UInt64")
		v.SetUInt64(x)
	case ua.TypeFloat:
		var f float64
		f, err = float(n, 32)
		v.SetFloat(float32(f))
	case ua.TypeDouble:
		var f float64
		f, err = float(n, 64)
		v.SetDouble(f)
	case ua.TypeString:
		var s string
		s, err = str(n, "String")
		v.SetString(s)
	case ua.TypeXmlElement:
		var s string
		s, err = str(n, "XmlElement")
		v.SetXmlElement(ua.XmlElement(s))
	case ua.TypeDateTime:
		var x ua.DateTime
		x, err = d.dateTime(n)
		v.SetDateTime(x)
	case ua.TypeStatusCode:
		var s ua.StatusCode
		s, err = d.statusCode(n)
		v.SetStatusCode(s)
	default:
		var x any
		x, err = d.otherScalar(n, t, depth)
		if err == nil {
			v, err = ua.NewVariant(x)
		}
	}
	if err != nil {
		return ua.Variant{}, err
	}
	return v, nil
}

// otherScalar decodes the types stored boxed in a Variant.
func (d *Decoder) otherScalar(n *node, t ua.TypeID, depth int) (any, error) {
	switch t {
	case ua.TypeGuid:
		return guid(n)
	case ua.TypeByteString:
		return byteString(n)
	case ua.TypeNodeID:
		return d.nodeID(n)
	case ua.TypeExpandedNodeID:
		return d.expandedNodeID(n)
	case ua.TypeQualifiedName:
		return d.qualifiedName(n)
	case ua.TypeLocalizedText:
		return d.localizedText(n)
	case ua.TypeExtensionObject:
		eo, err := d.extensionObject(n)
		if eo == nil && err == nil {
			eo = &ua.ExtensionObject{}
		}
		return eo, err
	case ua.TypeDataValue:
		dv := &ua.DataValue{}
		if n.kind == kNull {
			return dv, nil
		}
		return dv, d.dataValue(n, dv, depth+1, 0)
	case ua.TypeDiagnosticInfo:
		di, err := d.diagnosticInfo(n, depth+1)
		if di == nil && err == nil {
			di = &ua.DiagnosticInfo{}
		}
		return di, err
	}
	return nil, errf("type %v", t)
}

// typedArray decodes a JSON array of values of type t into an array Variant.
// A one-dimensional Byte array comes back as a ByteString: package ua has no
// constructor for a Byte[] Variant (ua.NewVariant takes []byte as ByteString).
func (d *Decoder) typedArray(n *node, t ua.TypeID, depth int) (ua.Variant, error) {
	arr, err := d.typedArrayRaw(n, t, depth)
	if err != nil {
		return ua.Variant{}, err
	}
	return ua.NewVariant(arr)
}

// typedArrayRaw decodes a JSON array of values of type t into a Go slice.
func (d *Decoder) typedArrayRaw(n *node, t ua.TypeID, depth int) (any, error) {
	if n.kind != kArr {
		return nil, errf("%v[]: got %v", t, n.kind)
	}
	if len(n.vals) > d.opts.MaxArrayLength {
		return nil, errf("array of %d elements exceeds the limit %d", len(n.vals), d.opts.MaxArrayLength)
	}
	if depth > d.opts.MaxDepth {
		return nil, ErrTooDeep
	}
	l := len(n.vals)
	var arr any
	var err error
	each := func(f func(i int, v *ua.Variant)) {
		for i := range n.vals {
			var v ua.Variant
			v, err = d.typedScalar(&n.vals[i], t, depth+1)
			if err != nil {
				return
			}
			f(i, &v)
		}
	}
	switch t {
	case ua.TypeNull:
		return nil, errf("array of Null")
	case ua.TypeBoolean:
		a := make([]bool, l)
		each(func(i int, v *ua.Variant) { a[i] = v.Boolean() })
		arr = a
	case ua.TypeSByte:
		a := make([]int8, l)
		each(func(i int, v *ua.Variant) { a[i] = v.SByte() })
		arr = a
	case ua.TypeByte:
		a := make([]byte, l)
		each(func(i int, v *ua.Variant) { a[i] = v.Byte() })
		arr = a
	case ua.TypeInt16:
		a := make([]int16, l)
		each(func(i int, v *ua.Variant) { a[i] = v.Int16() })
		arr = a
	case ua.TypeUInt16:
		a := make([]uint16, l)
		each(func(i int, v *ua.Variant) { a[i] = v.UInt16() })
		arr = a
	case ua.TypeInt32:
		a := make([]int32, l)
		each(func(i int, v *ua.Variant) { a[i] = v.Int32() })
		arr = a
	case ua.TypeUInt32:
		a := make([]uint32, l)
		each(func(i int, v *ua.Variant) { a[i] = v.UInt32() })
		arr = a
	case ua.TypeInt64:
		a := make([]int64, l)
		each(func(i int, v *ua.Variant) { a[i] = v.Int64() })
		arr = a
	case ua.TypeUInt64:
		a := make([]uint64, l)
		each(func(i int, v *ua.Variant) { a[i] = v.UInt64() })
		arr = a
	case ua.TypeFloat:
		a := make([]float32, l)
		each(func(i int, v *ua.Variant) { a[i] = v.Float() })
		arr = a
	case ua.TypeDouble:
		a := make([]float64, l)
		each(func(i int, v *ua.Variant) { a[i] = v.Double() })
		arr = a
	case ua.TypeString:
		a := make([]string, l)
		each(func(i int, v *ua.Variant) { a[i] = v.Str() })
		arr = a
	case ua.TypeXmlElement:
		a := make([]ua.XmlElement, l)
		each(func(i int, v *ua.Variant) { a[i] = ua.XmlElement(v.Str()) })
		arr = a
	case ua.TypeDateTime:
		a := make([]ua.DateTime, l)
		each(func(i int, v *ua.Variant) { a[i] = v.DateTime() })
		arr = a
	case ua.TypeStatusCode:
		a := make([]ua.StatusCode, l)
		each(func(i int, v *ua.Variant) { a[i] = v.StatusCode() })
		arr = a
	case ua.TypeGuid:
		arr, err = boxedArray[ua.Guid](d, n, t, depth)
	case ua.TypeByteString:
		arr, err = boxedArray[[]byte](d, n, t, depth)
	case ua.TypeNodeID:
		arr, err = boxedArray[ua.NodeID](d, n, t, depth)
	case ua.TypeExpandedNodeID:
		arr, err = boxedArray[ua.ExpandedNodeID](d, n, t, depth)
	case ua.TypeQualifiedName:
		arr, err = boxedArray[ua.QualifiedName](d, n, t, depth)
	case ua.TypeLocalizedText:
		arr, err = boxedArray[ua.LocalizedText](d, n, t, depth)
	case ua.TypeExtensionObject:
		a := make([]ua.ExtensionObject, l)
		for i := range n.vals {
			var eo *ua.ExtensionObject
			if eo, err = d.extensionObject(&n.vals[i]); err != nil {
				break
			}
			if eo != nil {
				a[i] = *eo
			}
		}
		arr = a
	case ua.TypeDataValue:
		a := make([]ua.DataValue, l)
		for i := range n.vals {
			if n.vals[i].kind == kNull {
				continue
			}
			if err = d.dataValue(&n.vals[i], &a[i], depth+1, 0); err != nil {
				break
			}
		}
		arr = a
	case ua.TypeVariant:
		a := make([]ua.Variant, l)
		for i := range n.vals {
			if a[i], err = d.variant(&n.vals[i], depth+1); err != nil {
				break
			}
		}
		arr = a
	case ua.TypeDiagnosticInfo:
		a := make([]ua.DiagnosticInfo, l)
		for i := range n.vals {
			var di *ua.DiagnosticInfo
			if di, err = d.diagnosticInfo(&n.vals[i], depth+1); err != nil {
				break
			}
			if di != nil {
				a[i] = *di
			}
		}
		arr = a
	default:
		return nil, errf("type id %d", t)
	}
	if err != nil {
		return nil, err
	}
	return arr, nil
}

func boxedArray[T any](d *Decoder, n *node, t ua.TypeID, depth int) ([]T, error) {
	a := make([]T, len(n.vals))
	for i := range n.vals {
		x, err := d.otherScalar(&n.vals[i], t, depth+1)
		if err != nil {
			return nil, err
		}
		v, ok := x.(T)
		if !ok {
			return nil, errf("%v element", t)
		}
		a[i] = v
	}
	return a, nil
}

// typedBody decodes a value without type information in the JSON (collapsed
// or NonReversible): scalar, 1-D array, 1.05 inline matrix or nested arrays.
func (d *Decoder) typedBody(n *node, t ua.TypeID, array bool, depth int) (ua.Variant, error) {
	if n.kind == kNull {
		if array {
			return ua.Variant{}, nil
		}
		return nullOf(t), nil
	}
	if !array {
		if t == ua.TypeVariant {
			return d.variant(n, depth)
		}
		return d.typedScalar(n, t, depth)
	}
	if n.kind == kObj {
		an, dn := n.get("Array"), n.get("Dimensions")
		if an == nil || dn == nil {
			return ua.Variant{}, errf("matrix object without Array and Dimensions")
		}
		arr, err := d.typedArrayRaw(an, t, depth)
		if err != nil {
			return ua.Variant{}, err
		}
		return d.applyDims(arr, dn)
	}
	if n.kind != kArr {
		return ua.Variant{}, errf("%v[]: got %v", t, n.kind)
	}
	// Nested arrays (NonReversible matrices) unless the elements are values.
	if len(n.vals) > 0 && n.vals[0].kind == kArr && t != ua.TypeVariant {
		var dims []int32
		for c := n; c.kind == kArr; {
			dims = append(dims, int32(len(c.vals)))
			if len(c.vals) == 0 || len(dims) > 32 {
				break
			}
			c = &c.vals[0]
		}
		flat := &node{kind: kArr}
		if err := flatten(n, dims, flat, d.opts.MaxArrayLength); err != nil {
			return ua.Variant{}, err
		}
		arr, err := d.typedArrayRaw(flat, t, depth)
		if err != nil {
			return ua.Variant{}, err
		}
		dn := &node{kind: kArr}
		for _, x := range dims {
			dn.vals = append(dn.vals, node{kind: kNum, s: strconv.Itoa(int(x))})
		}
		return d.applyDims(arr, dn)
	}
	return d.typedArray(n, t, depth)
}

func flatten(n *node, dims []int32, out *node, limit int) error {
	if len(dims) == 0 {
		if len(out.vals) >= limit {
			return errf("matrix exceeds the array limit")
		}
		out.vals = append(out.vals, *n)
		return nil
	}
	if n.kind != kArr || len(n.vals) != int(dims[0]) {
		return errf("nested arrays are not a regular matrix")
	}
	for i := range n.vals {
		if err := flatten(&n.vals[i], dims[1:], out, limit); err != nil {
			return err
		}
	}
	return nil
}

// inferVariant guesses a Variant from JSON without type information: numbers
// become Double, strings String, booleans Boolean, arrays of those arrays.
func (d *Decoder) inferVariant(n *node, depth int) (ua.Variant, error) {
	switch n.kind {
	case kNull:
		return ua.Variant{}, nil
	case kBool:
		return ua.NewBooleanVariant(n.b), nil
	case kNum:
		f, err := strconv.ParseFloat(n.s, 64)
		if err != nil {
			return ua.Variant{}, errf("number %q", n.s)
		}
		return ua.NewDoubleVariant(f), nil
	case kStr:
		return ua.NewStringVariant(n.s), nil
	case kArr:
		t := ua.TypeVariant
		if len(n.vals) > 0 {
			switch n.vals[0].kind {
			case kBool:
				t = ua.TypeBoolean
			case kNum:
				t = ua.TypeDouble
			case kStr:
				t = ua.TypeString
			}
		}
		if t == ua.TypeVariant {
			a := make([]ua.Variant, len(n.vals))
			for i := range n.vals {
				v, err := d.inferVariant(&n.vals[i], depth+1)
				if err != nil {
					return ua.Variant{}, err
				}
				a[i] = v
			}
			return ua.NewVariant(a)
		}
		return d.typedArray(n, t, depth)
	case kObj:
		if n.get("UaType") != nil || n.get("Type") != nil {
			return d.variant(n, depth)
		}
		if c := n.get("Code"); c != nil && len(n.keys) <= 2 {
			s, err := d.statusCode(n)
			if err != nil {
				return ua.Variant{}, err
			}
			var v ua.Variant
			v.SetStatusCode(s)
			return v, nil
		}
	}
	return ua.Variant{}, errf("cannot infer the type of a %v without metadata", n.kind)
}

// dataValue decodes a DataValue object: 1.05 (UaType/Value flattened), 1.04
// (Value is a {Type,Body} Variant), or Verbose PubSub (Value collapsed; its
// type is fieldType when known, else inferred).
func (d *Decoder) dataValue(n *node, dv *ua.DataValue, depth int, fieldType ua.TypeID) error {
	*dv = ua.DataValue{}
	if n.kind == kNull {
		return nil
	}
	if n.kind != kObj {
		return errf("DataValue: got %v", n.kind)
	}
	if depth > d.opts.MaxDepth {
		return ErrTooDeep
	}
	var err error
	vn := n.get("Value")
	switch {
	case n.get("UaType") != nil:
		dv.Value, err = d.variantMembers(n, "UaType", "Value", depth)
	case vn == nil:
	case vn.kind == kObj && (vn.get("Type") != nil || vn.get("UaType") != nil):
		dv.Value, err = d.variant(vn, depth+1)
	case fieldType != 0:
		dv.Value, err = d.typedBody(vn, fieldType, vn.kind == kArr || (vn.kind == kObj && vn.get("Array") != nil), depth+1)
	default:
		dv.Value, err = d.inferVariant(vn, depth+1)
	}
	if err != nil {
		return err
	}
	sn := n.get("Status")
	if sn == nil {
		sn = n.get("StatusCode")
	}
	if sn != nil {
		if dv.Status, err = d.statusCode(sn); err != nil {
			return err
		}
	}
	if x := n.get("SourceTimestamp"); x != nil {
		if dv.SourceTimestamp, err = d.dateTime(x); err != nil {
			return err
		}
	}
	if x := n.get("ServerTimestamp"); x != nil {
		if dv.ServerTimestamp, err = d.dateTime(x); err != nil {
			return err
		}
	}
	pico := func(a, b string) (uint16, error) {
		x := n.get(a)
		if x == nil {
			x = n.get(b)
		}
		if x == nil {
			return 0, nil
		}
		_, v, err := integer(x, 0, math.MaxUint16, a)
		return uint16(v), err
	}
	if dv.SourcePicoseconds, err = pico("SourcePicoseconds", "SourcePicoSeconds"); err != nil {
		return err
	}
	if dv.ServerPicoseconds, err = pico("ServerPicoseconds", "ServerPicoSeconds"); err != nil {
		return err
	}
	return nil
}

// jsonBodied decodes an ExtensionObject with a JSON body: the members of n
// (1.05) or of its Body (1.04), for the types this package has a JSON
// mapping for.
func (d *Decoder) jsonBodied(n, body *node, typeID ua.ExpandedNodeID, legacy bool) (*ua.ExtensionObject, error) {
	if typeID.ServerIndex == 0 && typeID.NamespaceURI == "" && typeID.Namespace == 0 && typeID.Type == ua.IDNumeric {
		id := typeID.Numeric
		if legacy {
			if info, ok := ua.TypeByEncodingID(id); ok {
				id = info.DataTypeID
			}
		}
		if c, ok := structCodecs[id]; ok {
			src := n
			if legacy {
				src = body
			}
			if src == nil {
				return nil, errf("ExtensionObject without body")
			}
			v, err := c.read(d, src)
			if err != nil {
				return nil, err
			}
			eo := ua.NewExtensionObject(v)
			return &eo, nil
		}
	}
	return nil, errf("ExtensionObject %s has a JSON body and no JSON mapping is known for the type", typeID)
}
