package jsonenc

import (
	"math"

	"github.com/uagate/gateway/uastack/ua"
)

// Hand-written JSON mappings of the structured types PubSub needs (Part 14
// DataSetMetaData and what it contains) and of common payload structures.
// They are used for ExtensionObject bodies of these types and for the
// ua-metadata message; other structures are written with a UA Binary body.

type structCodec struct {
	write func(e *Encoder, v ua.Encodable)
	read  func(d *Decoder, n *node) (ua.Encodable, error)
}

// structCodecs is filled in init: the codecs refer to the Encoder, whose
// ExtensionObject writer refers back to the table.
var structCodecs map[uint32]structCodec

func init() {
	structCodecs = map[uint32]structCodec{
		ua.ID_KeyValuePair: {
			func(e *Encoder, v ua.Encodable) { writeKeyValuePairFields(e, v.(*ua.KeyValuePair)) },
			func(d *Decoder, n *node) (ua.Encodable, error) {
				var kv ua.KeyValuePair
				return &kv, d.readKeyValuePair(n, &kv)
			},
		},
		ua.ID_ConfigurationVersionDataType: {
			func(e *Encoder, v ua.Encodable) {
				writeConfigurationVersionFields(e, v.(*ua.ConfigurationVersionDataType))
			},
			func(d *Decoder, n *node) (ua.Encodable, error) {
				var c ua.ConfigurationVersionDataType
				return &c, d.readConfigurationVersion(n, &c)
			},
		},
		ua.ID_FieldMetaData: {
			func(e *Encoder, v ua.Encodable) { writeFieldMetaDataFields(e, v.(*ua.FieldMetaData)) },
			func(d *Decoder, n *node) (ua.Encodable, error) {
				var f ua.FieldMetaData
				return &f, d.readFieldMetaData(n, &f)
			},
		},
		ua.ID_DataSetMetaDataType: {
			func(e *Encoder, v ua.Encodable) { writeDataSetMetaDataFields(e, v.(*ua.DataSetMetaDataType)) },
			func(d *Decoder, n *node) (ua.Encodable, error) {
				var m ua.DataSetMetaDataType
				return &m, d.readDataSetMetaData(n, &m)
			},
		},
		ua.ID_EUInformation: {
			func(e *Encoder, v ua.Encodable) {
				x := v.(*ua.EUInformation)
				e.FieldString("NamespaceUri", x.NamespaceURI)
				e.FieldInt32("UnitId", x.UnitID)
				e.FieldLocalizedText("DisplayName", x.DisplayName)
				e.FieldLocalizedText("Description", x.Description)
			},
			func(d *Decoder, n *node) (ua.Encodable, error) {
				var x ua.EUInformation
				r := objReader{d: d, n: n}
				x.NamespaceURI = r.str("NamespaceUri")
				x.UnitID = int32(r.int("UnitId", math.MinInt32, math.MaxInt32))
				x.DisplayName = r.lt("DisplayName")
				x.Description = r.lt("Description")
				return &x, r.err
			},
		},
		ua.ID_Range: {
			func(e *Encoder, v ua.Encodable) {
				x := v.(*ua.Range)
				e.FieldDouble("Low", x.Low)
				e.FieldDouble("High", x.High)
			},
			func(d *Decoder, n *node) (ua.Encodable, error) {
				var x ua.Range
				r := objReader{d: d, n: n}
				x.Low = r.double("Low")
				x.High = r.double("High")
				return &x, r.err
			},
		},
	}
}

// jsonCodecFor returns the JSON mapping of a structure value, if there is one.
func jsonCodecFor(v ua.Encodable) (structCodec, uint32, bool) {
	s, ok := v.(ua.Structure)
	if !ok {
		return structCodec{}, 0, false
	}
	c, ok := structCodecs[s.DataTypeID()]
	return c, s.DataTypeID(), ok
}

func writeKeyValuePairFields(e *Encoder, kv *ua.KeyValuePair) {
	e.FieldQualifiedName("Key", kv.Key)
	e.FieldVariant("Value", &kv.Value)
}

func writeConfigurationVersionFields(e *Encoder, c *ua.ConfigurationVersionDataType) {
	e.FieldUInt32("MajorVersion", c.MajorVersion)
	e.FieldUInt32("MinorVersion", c.MinorVersion)
}

func writeFieldMetaDataFields(e *Encoder, f *ua.FieldMetaData) {
	e.FieldString("Name", f.Name)
	e.FieldLocalizedText("Description", f.Description)
	e.FieldUint("FieldFlags", uint64(f.FieldFlags))
	e.FieldUint("BuiltInType", uint64(f.BuiltInType))
	e.FieldNodeID("DataType", f.DataType)
	e.FieldInt32("ValueRank", f.ValueRank)
	e.FieldUInt32Array("ArrayDimensions", f.ArrayDimensions)
	e.FieldUInt32("MaxStringLength", f.MaxStringLength)
	e.FieldGuid("DataSetFieldId", f.DataSetFieldID)
	if e.FieldArray("Properties", f.Properties == nil) {
		for i := range f.Properties {
			e.StartObject()
			writeKeyValuePairFields(e, &f.Properties[i])
			e.EndObject()
		}
		e.EndArray()
	}
}

func writeStructureFieldFields(e *Encoder, f *ua.StructureField) {
	e.FieldString("Name", f.Name)
	e.FieldLocalizedText("Description", f.Description)
	e.FieldNodeID("DataType", f.DataType)
	e.FieldInt32("ValueRank", f.ValueRank)
	e.FieldUInt32Array("ArrayDimensions", f.ArrayDimensions)
	e.FieldUInt32("MaxStringLength", f.MaxStringLength)
	e.FieldBoolean("IsOptional", f.IsOptional)
}

func writeDataSetMetaDataFields(e *Encoder, m *ua.DataSetMetaDataType) {
	e.FieldStringArray("Namespaces", m.Namespaces)
	if e.FieldArray("StructureDataTypes", m.StructureDataTypes == nil) {
		for i := range m.StructureDataTypes {
			s := &m.StructureDataTypes[i]
			e.StartObject()
			e.FieldNodeID("DataTypeId", s.DataTypeId)
			e.FieldQualifiedName("Name", s.Name)
			e.FieldObject("StructureDefinition")
			def := &s.StructureDefinition
			e.FieldNodeID("DefaultEncodingId", def.DefaultEncodingID)
			e.FieldNodeID("BaseDataType", def.BaseDataType)
			e.FieldEnum("StructureType", int32(def.StructureType), enumName(def.StructureType.String()))
			if e.FieldArray("Fields", def.Fields == nil) {
				for j := range def.Fields {
					e.StartObject()
					writeStructureFieldFields(e, &def.Fields[j])
					e.EndObject()
				}
				e.EndArray()
			}
			e.EndObject()
			e.EndObject()
		}
		e.EndArray()
	}
	if e.FieldArray("EnumDataTypes", m.EnumDataTypes == nil) {
		for i := range m.EnumDataTypes {
			s := &m.EnumDataTypes[i]
			e.StartObject()
			e.FieldNodeID("DataTypeId", s.DataTypeId)
			e.FieldQualifiedName("Name", s.Name)
			e.FieldObject("EnumDefinition")
			if e.FieldArray("Fields", s.EnumDefinition.Fields == nil) {
				for j := range s.EnumDefinition.Fields {
					f := &s.EnumDefinition.Fields[j]
					e.StartObject()
					e.FieldInt64("Value", f.Value)
					e.FieldLocalizedText("DisplayName", f.DisplayName)
					e.FieldLocalizedText("Description", f.Description)
					e.FieldString("Name", f.Name)
					e.EndObject()
				}
				e.EndArray()
			}
			e.EndObject()
			e.FieldUint("BuiltInType", uint64(s.BuiltInType))
			e.EndObject()
		}
		e.EndArray()
	}
	if e.FieldArray("SimpleDataTypes", m.SimpleDataTypes == nil) {
		for i := range m.SimpleDataTypes {
			s := &m.SimpleDataTypes[i]
			e.StartObject()
			e.FieldNodeID("DataTypeId", s.DataTypeId)
			e.FieldQualifiedName("Name", s.Name)
			e.FieldNodeID("BaseDataType", s.BaseDataType)
			e.FieldUint("BuiltInType", uint64(s.BuiltInType))
			e.EndObject()
		}
		e.EndArray()
	}
	e.FieldString("Name", m.Name)
	e.FieldLocalizedText("Description", m.Description)
	if e.FieldArray("Fields", m.Fields == nil) {
		for i := range m.Fields {
			e.StartObject()
			writeFieldMetaDataFields(e, &m.Fields[i])
			e.EndObject()
		}
		e.EndArray()
	}
	e.FieldGuid("DataSetClassId", m.DataSetClassID)
	e.FieldObject("ConfigurationVersion")
	writeConfigurationVersionFields(e, &m.ConfigurationVersion)
	e.EndObject()
}

// enumName returns s unless it is the "Type(<n>)" fallback of an unknown value.
func enumName(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '(' {
			return ""
		}
	}
	return s
}

// WriteDataSetMetaData writes m as a JSON object (DataSetMetaDataType).
func (e *Encoder) WriteDataSetMetaData(m *ua.DataSetMetaDataType) {
	e.StartObject()
	writeDataSetMetaDataFields(e, m)
	e.EndObject()
}

// ---- reading ----

// objReader reads members of a JSON object, keeping the first error.
type objReader struct {
	d   *Decoder
	n   *node
	err error
}

func (r *objReader) member(key string) *node {
	if r.err != nil {
		return nil
	}
	if r.n == nil || r.n.kind != kObj {
		if r.n != nil && r.n.kind != kNull {
			r.err = errf("want an object, got %v", r.n.kind)
		}
		return nil
	}
	return r.n.get(key)
}

func (r *objReader) set(err error) {
	if r.err == nil && err != nil {
		r.err = err
	}
}

func (r *objReader) str(key string) string {
	x := r.member(key)
	if x == nil {
		return ""
	}
	s, err := str(x, key)
	r.set(err)
	return s
}

func (r *objReader) int(key string, lo int64, hi uint64) int64 {
	x := r.member(key)
	if x == nil {
		return 0
	}
	v, _, err := integer(x, lo, hi, key)
	r.set(err)
	return v
}

func (r *objReader) uint(key string, hi uint64) uint64 {
	x := r.member(key)
	if x == nil {
		return 0
	}
	_, v, err := integer(x, 0, hi, key)
	r.set(err)
	return v
}

func (r *objReader) double(key string) float64 {
	x := r.member(key)
	if x == nil {
		return 0
	}
	f, err := float(x, 64)
	r.set(err)
	return f
}

func (r *objReader) boolean(key string) bool {
	x := r.member(key)
	if x == nil {
		return false
	}
	b, err := r.d.boolean(x)
	r.set(err)
	return b
}

func (r *objReader) lt(key string) ua.LocalizedText {
	x := r.member(key)
	if x == nil {
		return ua.LocalizedText{}
	}
	l, err := r.d.localizedText(x)
	r.set(err)
	return l
}

func (r *objReader) qn(key string) ua.QualifiedName {
	x := r.member(key)
	if x == nil {
		return ua.QualifiedName{}
	}
	q, err := r.d.qualifiedName(x)
	r.set(err)
	return q
}

func (r *objReader) nodeID(key string) ua.NodeID {
	x := r.member(key)
	if x == nil {
		return ua.NodeID{}
	}
	id, err := r.d.nodeID(x)
	r.set(err)
	return id
}

func (r *objReader) guid(key string) ua.Guid {
	x := r.member(key)
	if x == nil {
		return ua.Guid{}
	}
	g, err := guid(x)
	r.set(err)
	return g
}

// each calls f for every element of the array member key and reports
// whether the member was a (possibly empty) array.
func (r *objReader) each(key string, f func(n *node)) bool {
	x := r.member(key)
	if x == nil || x.kind == kNull {
		return false
	}
	if x.kind != kArr {
		r.set(errf("%s: got %v, want an array", key, x.kind))
		return false
	}
	if len(x.vals) > r.d.opts.MaxArrayLength {
		r.set(errf("%s: too many elements", key))
		return false
	}
	for i := range x.vals {
		if r.err != nil {
			return true
		}
		f(&x.vals[i])
	}
	return true
}

// enum reads an enumeration written as a number or "<Name>_<Value>".
func (r *objReader) enum(key string) int32 {
	x := r.member(key)
	if x == nil {
		return 0
	}
	if x.kind == kStr {
		s := x.s
		for i := len(s) - 1; i >= 0; i-- {
			if s[i] == '_' {
				s = s[i+1:]
				break
			}
		}
		x = &node{kind: kNum, s: s}
	}
	v, _, err := integer(x, math.MinInt32, math.MaxInt32, key)
	r.set(err)
	return int32(v)
}

func (d *Decoder) readKeyValuePair(n *node, kv *ua.KeyValuePair) error {
	r := objReader{d: d, n: n}
	kv.Key = r.qn("Key")
	if x := r.member("Value"); x != nil {
		v, err := d.variant(x, 1)
		r.set(err)
		kv.Value = v
	}
	return r.err
}

func (d *Decoder) readConfigurationVersion(n *node, c *ua.ConfigurationVersionDataType) error {
	r := objReader{d: d, n: n}
	c.MajorVersion = uint32(r.uint("MajorVersion", math.MaxUint32))
	c.MinorVersion = uint32(r.uint("MinorVersion", math.MaxUint32))
	return r.err
}

func (d *Decoder) readFieldMetaData(n *node, f *ua.FieldMetaData) error {
	r := objReader{d: d, n: n}
	f.Name = r.str("Name")
	f.Description = r.lt("Description")
	f.FieldFlags = ua.DataSetFieldFlags(r.uint("FieldFlags", math.MaxUint16))
	f.BuiltInType = byte(r.uint("BuiltInType", math.MaxUint8))
	f.DataType = r.nodeID("DataType")
	f.ValueRank = int32(r.int("ValueRank", math.MinInt32, math.MaxInt32))
	f.ArrayDimensions = readUInt32s(&r, "ArrayDimensions")
	f.MaxStringLength = uint32(r.uint("MaxStringLength", math.MaxUint32))
	f.DataSetFieldID = r.guid("DataSetFieldId")
	f.Properties = nil
	if r.each("Properties", func(x *node) {
		var kv ua.KeyValuePair
		r.set(d.readKeyValuePair(x, &kv))
		f.Properties = append(f.Properties, kv)
	}) && f.Properties == nil {
		f.Properties = []ua.KeyValuePair{}
	}
	return r.err
}

func readUInt32s(r *objReader, key string) []uint32 {
	var out []uint32
	if r.each(key, func(x *node) {
		_, v, err := integer(x, 0, math.MaxUint32, key)
		r.set(err)
		out = append(out, uint32(v))
	}) && out == nil {
		out = []uint32{}
	}
	return out
}

func (d *Decoder) readDataSetMetaData(n *node, m *ua.DataSetMetaDataType) error {
	r := objReader{d: d, n: n}
	m.Namespaces = nil
	if r.each("Namespaces", func(x *node) {
		s, err := str(x, "Namespaces")
		r.set(err)
		m.Namespaces = append(m.Namespaces, s)
	}) && m.Namespaces == nil {
		m.Namespaces = []string{}
	}
	// Namespace indexes inside the metadata refer to its own Namespaces.
	if len(m.Namespaces) > 0 {
		sub := *d
		sub.opts.NamespaceURIs = m.Namespaces
		if m.Namespaces[0] != UANamespace && m.Namespaces[0] != "" {
			sub.opts.NamespaceURIs = append([]string{UANamespace}, m.Namespaces...)
		}
		d = &sub
		r.d = d
	}
	r.each("StructureDataTypes", func(x *node) {
		var s ua.StructureDescription
		sr := objReader{d: d, n: x}
		s.DataTypeId = sr.nodeID("DataTypeId")
		s.Name = sr.qn("Name")
		if def := sr.member("StructureDefinition"); def != nil {
			dr := objReader{d: d, n: def}
			s.StructureDefinition.DefaultEncodingID = dr.nodeID("DefaultEncodingId")
			s.StructureDefinition.BaseDataType = dr.nodeID("BaseDataType")
			s.StructureDefinition.StructureType = ua.StructureType(dr.enum("StructureType"))
			dr.each("Fields", func(fx *node) {
				fr := objReader{d: d, n: fx}
				s.StructureDefinition.Fields = append(s.StructureDefinition.Fields, ua.StructureField{
					Name:            fr.str("Name"),
					Description:     fr.lt("Description"),
					DataType:        fr.nodeID("DataType"),
					ValueRank:       int32(fr.int("ValueRank", math.MinInt32, math.MaxInt32)),
					ArrayDimensions: readUInt32s(&fr, "ArrayDimensions"),
					MaxStringLength: uint32(fr.uint("MaxStringLength", math.MaxUint32)),
					IsOptional:      fr.boolean("IsOptional"),
				})
				dr.set(fr.err)
			})
			sr.set(dr.err)
		}
		r.set(sr.err)
		m.StructureDataTypes = append(m.StructureDataTypes, s)
	})
	r.each("EnumDataTypes", func(x *node) {
		var s ua.EnumDescription
		sr := objReader{d: d, n: x}
		s.DataTypeId = sr.nodeID("DataTypeId")
		s.Name = sr.qn("Name")
		s.BuiltInType = byte(sr.uint("BuiltInType", math.MaxUint8))
		if def := sr.member("EnumDefinition"); def != nil {
			dr := objReader{d: d, n: def}
			dr.each("Fields", func(fx *node) {
				fr := objReader{d: d, n: fx}
				s.EnumDefinition.Fields = append(s.EnumDefinition.Fields, ua.EnumField{
					Value:       fr.int("Value", math.MinInt64, math.MaxInt64),
					DisplayName: fr.lt("DisplayName"),
					Description: fr.lt("Description"),
					Name:        fr.str("Name"),
				})
				dr.set(fr.err)
			})
			sr.set(dr.err)
		}
		r.set(sr.err)
		m.EnumDataTypes = append(m.EnumDataTypes, s)
	})
	r.each("SimpleDataTypes", func(x *node) {
		sr := objReader{d: d, n: x}
		m.SimpleDataTypes = append(m.SimpleDataTypes, ua.SimpleTypeDescription{
			DataTypeId:   sr.nodeID("DataTypeId"),
			Name:         sr.qn("Name"),
			BaseDataType: sr.nodeID("BaseDataType"),
			BuiltInType:  byte(sr.uint("BuiltInType", math.MaxUint8)),
		})
		r.set(sr.err)
	})
	m.Name = r.str("Name")
	m.Description = r.lt("Description")
	m.Fields = nil
	r.each("Fields", func(x *node) {
		var f ua.FieldMetaData
		r.set(d.readFieldMetaData(x, &f))
		m.Fields = append(m.Fields, f)
	})
	m.DataSetClassID = r.guid("DataSetClassId")
	if x := r.member("ConfigurationVersion"); x != nil {
		r.set(d.readConfigurationVersion(x, &m.ConfigurationVersion))
	}
	return r.err
}
