package server

import (
	"sync/atomic"

	"github.com/uagate/gateway/uastack/ua"
)

// Attribute ids (Part 6 Annex A).
const (
	attrNodeID                  uint32 = 1
	attrNodeClass               uint32 = 2
	attrBrowseName              uint32 = 3
	attrDisplayName             uint32 = 4
	attrDescription             uint32 = 5
	attrWriteMask               uint32 = 6
	attrUserWriteMask           uint32 = 7
	attrIsAbstract              uint32 = 8
	attrSymmetric               uint32 = 9
	attrInverseName             uint32 = 10
	attrContainsNoLoops         uint32 = 11
	attrEventNotifier           uint32 = 12
	attrValue                   uint32 = 13
	attrDataType                uint32 = 14
	attrValueRank               uint32 = 15
	attrArrayDimensions         uint32 = 16
	attrAccessLevel             uint32 = 17
	attrUserAccessLevel         uint32 = 18
	attrMinimumSamplingInterval uint32 = 19
	attrHistorizing             uint32 = 20
	attrExecutable              uint32 = 21
	attrUserExecutable          uint32 = 22
	attrAccessLevelEx           uint32 = 27
	attrMax                     uint32 = 27
)

const (
	accessRead        = byte(ua.AccessLevelTypeCurrentRead)
	accessWrite       = byte(ua.AccessLevelTypeCurrentWrite)
	accessHistoryRead = byte(ua.AccessLevelTypeHistoryRead)
)

// node is a node of the address space. Everything but the value is fixed once
// the address space is built, so nodes are read without locks.
type node struct {
	id          ua.NodeID
	class       ua.NodeClass
	browseName  ua.QualifiedName
	displayName ua.LocalizedText
	description ua.LocalizedText
	refs        []ref
	typeDef     *node
	parent      *node // the hierarchical parent that created it

	// Variables and VariableTypes.
	dataType    ua.NodeID
	valueRank   int32
	arrayDims   []uint32
	accessLevel byte
	minSampling float64 // ms
	// The value comes from exactly one of these.
	static *staticValue
	gen    *generator
	dyn    func(now ua.DateTime) ua.DataValue
	// euRange is the EURange of an AnalogItem (percent deadbands need it).
	euRange *ua.Range

	// Objects.
	eventNotifier byte
	// events is set on nodes that are event notifiers: the items that monitor
	// their events.
	events *eventSource

	// Methods.
	method  methodFunc
	inArgs  []ua.Argument
	outArgs []ua.Argument

	// Types.
	isAbstract  bool
	symmetric   bool
	inverseName ua.LocalizedText
	supertype   *node // HasSubtype inverse, for type checks
}

// ref is a reference from a node; every reference is stored at both ends.
type ref struct {
	typ     *node // the ReferenceType node
	forward bool
	target  *node
}

// staticValue is the value of a writable variable: an immutable DataValue
// replaced on write. Samplers compare the pointer to see a change.
type staticValue struct {
	p atomic.Pointer[ua.DataValue]
}

func (s *staticValue) load() *ua.DataValue { return s.p.Load() }

func (s *staticValue) store(dv ua.DataValue) { s.p.Store(&dv) }

// addressSpace is the server's node table; it is built by New and read-only
// afterwards (values aside).
type addressSpace struct {
	nodes map[ua.NodeID]*node
	// refTypes by numeric id (namespace 0), for the reference type checks of
	// Browse and TranslateBrowsePaths.
	refTypes map[uint32]*node
	// namespaces is the NamespaceArray.
	namespaces []string
}

func newAddressSpace() *addressSpace {
	return &addressSpace{nodes: make(map[ua.NodeID]*node, 1024), refTypes: map[uint32]*node{}}
}

func (as *addressSpace) get(id ua.NodeID) *node { return as.nodes[id] }

func (as *addressSpace) ns0(id uint32) *node { return as.nodes[ua.NewNumericNodeID(0, id)] }

// add inserts n; a duplicate id is a bug in the builder.
func (as *addressSpace) add(n *node) *node {
	if _, dup := as.nodes[n.id]; dup {
		panic("server: duplicate node " + n.id.String())
	}
	as.nodes[n.id] = n
	return n
}

// link adds a reference of type typ (namespace 0 id) from src to dst, and the
// inverse one at dst.
func (as *addressSpace) link(src *node, typ uint32, dst *node) {
	rt := as.refTypes[typ]
	if rt == nil {
		panic("server: unknown reference type")
	}
	src.refs = append(src.refs, ref{typ: rt, forward: true, target: dst})
	dst.refs = append(dst.refs, ref{typ: rt, forward: false, target: src})
	if typ == ua.ID_HasSubtype {
		dst.supertype = src
	}
	if typ == ua.ID_HasTypeDefinition {
		src.typeDef = dst
	}
}

// isSubtype reports whether t is base or one of its subtypes.
func isSubtype(t, base *node) bool {
	for ; t != nil; t = t.supertype {
		if t == base {
			return true
		}
	}
	return false
}

// refMatches reports whether the reference type rt fits a filter: filter is
// nil (any), rt itself, or (with subtypes) an ancestor of rt.
func refMatches(rt, filter *node, subtypes bool) bool {
	switch {
	case filter == nil:
		return true
	case subtypes:
		return isSubtype(rt, filter)
	default:
		return rt == filter
	}
}

// referenceTypes are the standard reference types the server knows: id, name,
// inverse name, supertype, abstract, symmetric.
var referenceTypes = []struct {
	id        uint32
	name      string
	inverse   string
	super     uint32
	abstract  bool
	symmetric bool
}{
	{ua.ID_References, "References", "", 0, true, true},
	{ua.ID_HierarchicalReferences, "HierarchicalReferences", "InverseHierarchicalReferences", ua.ID_References, true, false},
	{ua.ID_NonHierarchicalReferences, "NonHierarchicalReferences", "", ua.ID_References, true, true},
	{ua.ID_HasChild, "HasChild", "ChildOf", ua.ID_HierarchicalReferences, true, false},
	{ua.ID_Organizes, "Organizes", "OrganizedBy", ua.ID_HierarchicalReferences, false, false},
	{ua.ID_HasEventSource, "HasEventSource", "EventSourceOf", ua.ID_HierarchicalReferences, false, false},
	{ua.ID_HasNotifier, "HasNotifier", "NotifierOf", ua.ID_HasEventSource, false, false},
	{ua.ID_Aggregates, "Aggregates", "AggregatedBy", ua.ID_HasChild, true, false},
	{ua.ID_HasSubtype, "HasSubtype", "SubtypeOf", ua.ID_HasChild, false, false},
	{ua.ID_HasComponent, "HasComponent", "ComponentOf", ua.ID_Aggregates, false, false},
	{ua.ID_HasProperty, "HasProperty", "PropertyOf", ua.ID_Aggregates, false, false},
	{ua.ID_HasTypeDefinition, "HasTypeDefinition", "TypeDefinitionOf", ua.ID_NonHierarchicalReferences, false, false},
	{ua.ID_HasModellingRule, "HasModellingRule", "ModellingRuleOf", ua.ID_NonHierarchicalReferences, false, false},
	{ua.ID_HasEncoding, "HasEncoding", "EncodingOf", ua.ID_NonHierarchicalReferences, false, false},
	{ua.ID_GeneratesEvent, "GeneratesEvent", "GeneratedBy", ua.ID_NonHierarchicalReferences, false, false},
}

// builder makes nodes with less ceremony.
type builder struct {
	as *addressSpace
	ns uint16
}

func (b *builder) objectType(id uint32, name string, super uint32, abstract bool) *node {
	n := b.as.add(&node{
		id: ua.NewNumericNodeID(0, id), class: ua.NodeClassObjectType,
		browseName: ua.NewQualifiedName(0, name), displayName: ua.NewLocalizedText(name), isAbstract: abstract,
	})
	if super != 0 {
		b.as.link(b.as.ns0(super), ua.ID_HasSubtype, n)
	}
	return n
}

func (b *builder) variableType(id uint32, name string, super uint32, dataType uint32, abstract bool) *node {
	n := b.as.add(&node{
		id: ua.NewNumericNodeID(0, id), class: ua.NodeClassVariableType,
		browseName: ua.NewQualifiedName(0, name), displayName: ua.NewLocalizedText(name), isAbstract: abstract,
		dataType: ua.NewNumericNodeID(0, dataType), valueRank: -2,
	})
	if super != 0 {
		b.as.link(b.as.ns0(super), ua.ID_HasSubtype, n)
	}
	return n
}

func (b *builder) dataTypeNode(id uint32, name string, super uint32, abstract bool) *node {
	n := b.as.add(&node{
		id: ua.NewNumericNodeID(0, id), class: ua.NodeClassDataType,
		browseName: ua.NewQualifiedName(0, name), displayName: ua.NewLocalizedText(name), isAbstract: abstract,
	})
	if super != 0 {
		b.as.link(b.as.ns0(super), ua.ID_HasSubtype, n)
	}
	return n
}

// folder makes a FolderType object organized by parent.
func (b *builder) folder(parent *node, id ua.NodeID, name string) *node {
	return b.object(parent, ua.ID_Organizes, id, name, ua.ID_FolderType)
}

// object makes an object, referenced from parent with refType.
func (b *builder) object(parent *node, refType uint32, id ua.NodeID, name string, typeDef uint32) *node {
	n := b.as.add(&node{
		id: id, class: ua.NodeClassObject, parent: parent,
		browseName: ua.NewQualifiedName(id.Namespace, name), displayName: ua.NewLocalizedText(name),
	})
	if parent != nil {
		b.as.link(parent, refType, n)
	}
	b.as.link(n, ua.ID_HasTypeDefinition, b.as.ns0(typeDef))
	return n
}

// variable makes a variable below parent (HasComponent, or HasProperty for a
// property type definition).
func (b *builder) variable(parent *node, id ua.NodeID, name string, dataType uint32, valueRank int32, typeDef uint32) *node {
	refType := uint32(ua.ID_HasComponent)
	if typeDef == ua.ID_PropertyType {
		refType = ua.ID_HasProperty
	}
	if parent != nil && parent.class == ua.NodeClassObject && parent.typeDef != nil && parent.typeDef.id.Numeric == ua.ID_FolderType && parent.id.Namespace != 0 {
		refType = ua.ID_Organizes
	}
	n := b.as.add(&node{
		id: id, class: ua.NodeClassVariable, parent: parent,
		browseName: ua.NewQualifiedName(id.Namespace, name), displayName: ua.NewLocalizedText(name),
		dataType: ua.NewNumericNodeID(0, dataType), valueRank: valueRank, accessLevel: accessRead,
	})
	if parent != nil {
		b.as.link(parent, refType, n)
	}
	b.as.link(n, ua.ID_HasTypeDefinition, b.as.ns0(typeDef))
	return n
}

// constant makes a read-only variable with a fixed value.
func (b *builder) constant(parent *node, id ua.NodeID, name string, dataType uint32, valueRank int32, typeDef uint32, v ua.Variant) *node {
	n := b.variable(parent, id, name, dataType, valueRank, typeDef)
	n.static = &staticValue{}
	n.static.store(ua.DataValue{Value: v, SourceTimestamp: ua.Now()})
	return n
}

// dynamic makes a read-only variable whose value is computed when read.
func (b *builder) dynamic(parent *node, id ua.NodeID, name string, dataType uint32, valueRank int32, typeDef uint32, f func(ua.DateTime) ua.DataValue) *node {
	n := b.variable(parent, id, name, dataType, valueRank, typeDef)
	n.dyn = f
	return n
}

// method makes a method below parent.
func (b *builder) method(parent *node, id ua.NodeID, name string, in, out []ua.Argument, f methodFunc) *node {
	n := b.as.add(&node{
		id: id, class: ua.NodeClassMethod, parent: parent,
		browseName: ua.NewQualifiedName(id.Namespace, name), displayName: ua.NewLocalizedText(name),
		method: f, inArgs: in, outArgs: out,
	})
	b.as.link(parent, ua.ID_HasComponent, n)
	if len(in) > 0 {
		b.argsProperty(n, "InputArguments", in)
	}
	if len(out) > 0 {
		b.argsProperty(n, "OutputArguments", out)
	}
	return n
}

func (b *builder) argsProperty(m *node, name string, args []ua.Argument) {
	eos := make([]ua.ExtensionObject, len(args))
	for i := range args {
		a := args[i]
		eos[i] = ua.NewExtensionObject(&a)
	}
	var id ua.NodeID
	if m.id.Namespace == 0 && m.id.Type == ua.IDNumeric && m.id.Numeric == ua.ID_Server_GetMonitoredItems {
		id = ua.NewNumericNodeID(0, ua.ID_Server_GetMonitoredItems_InputArguments)
		if name == "OutputArguments" {
			id = ua.NewNumericNodeID(0, ua.ID_Server_GetMonitoredItems_OutputArguments)
		}
	} else if m.id.Type == ua.IDString {
		id = ua.NewStringNodeID(m.id.Namespace, m.id.Text+"."+name)
	} else {
		id = ua.NewStringNodeID(b.ns, m.id.String()+"."+name)
	}
	n := b.constant(m, id, name, ua.ID_Argument, 1, ua.ID_PropertyType, ua.MustVariant(eos))
	n.browseName = ua.NewQualifiedName(0, name)
	n.arrayDims = []uint32{uint32(len(args))}
}

// buildStandard makes the standard nodes: the folders, the type hierarchy the
// server uses and the reference types.
func (b *builder) buildStandard() {
	as := b.as
	// Reference types first: link needs them.
	for _, rt := range referenceTypes {
		n := as.add(&node{
			id: ua.NewNumericNodeID(0, rt.id), class: ua.NodeClassReferenceType,
			browseName: ua.NewQualifiedName(0, rt.name), displayName: ua.NewLocalizedText(rt.name),
			isAbstract: rt.abstract, symmetric: rt.symmetric, inverseName: ua.NewLocalizedText(rt.inverse),
		})
		as.refTypes[rt.id] = n
	}
	for _, rt := range referenceTypes {
		if rt.super != 0 {
			as.link(as.refTypes[rt.super], ua.ID_HasSubtype, as.refTypes[rt.id])
		}
	}
	// Object types needed by the folders themselves.
	base := as.add(&node{id: ua.NewNumericNodeID(0, ua.ID_BaseObjectType), class: ua.NodeClassObjectType,
		browseName: ua.NewQualifiedName(0, "BaseObjectType"), displayName: ua.NewLocalizedText("BaseObjectType")})
	b.objectType(ua.ID_FolderType, "FolderType", ua.ID_BaseObjectType, false)

	root := as.add(&node{id: ua.NewNumericNodeID(0, ua.ID_RootFolder), class: ua.NodeClassObject,
		browseName: ua.NewQualifiedName(0, "Root"), displayName: ua.NewLocalizedText("Root")})
	as.link(root, ua.ID_HasTypeDefinition, as.ns0(ua.ID_FolderType))
	b.folder(root, ua.NewNumericNodeID(0, ua.ID_ObjectsFolder), "Objects")
	types := b.folder(root, ua.NewNumericNodeID(0, ua.ID_TypesFolder), "Types")
	b.folder(root, ua.NewNumericNodeID(0, ua.ID_ViewsFolder), "Views")
	objTypes := b.folder(types, ua.NewNumericNodeID(0, ua.ID_ObjectTypesFolder), "ObjectTypes")
	varTypes := b.folder(types, ua.NewNumericNodeID(0, ua.ID_VariableTypesFolder), "VariableTypes")
	dataTypes := b.folder(types, ua.NewNumericNodeID(0, ua.ID_DataTypesFolder), "DataTypes")
	refTypes := b.folder(types, ua.NewNumericNodeID(0, ua.ID_ReferenceTypesFolder), "ReferenceTypes")
	as.link(objTypes, ua.ID_Organizes, base)
	as.link(refTypes, ua.ID_Organizes, as.refTypes[ua.ID_References])

	b.objectType(ua.ID_ServerType, "ServerType", ua.ID_BaseObjectType, false)
	b.objectType(ua.ID_ServerCapabilitiesType, "ServerCapabilitiesType", ua.ID_BaseObjectType, false)
	b.objectType(ua.ID_OperationLimitsType, "OperationLimitsType", ua.ID_FolderType, false)
	b.objectType(ua.ID_BaseEventType, "BaseEventType", ua.ID_BaseObjectType, true)
	b.objectType(ua.ID_SystemEventType, "SystemEventType", ua.ID_BaseEventType, false)
	b.objectType(ua.ID_ConditionType, "ConditionType", ua.ID_BaseEventType, true)
	b.objectType(ua.ID_AcknowledgeableConditionType, "AcknowledgeableConditionType", ua.ID_ConditionType, false)
	b.objectType(ua.ID_AlarmConditionType, "AlarmConditionType", ua.ID_AcknowledgeableConditionType, false)
	b.objectType(ua.ID_LimitAlarmType, "LimitAlarmType", ua.ID_AlarmConditionType, false)
	b.objectType(ua.ID_OffNormalAlarmType, "OffNormalAlarmType", ua.ID_AlarmConditionType, false)

	bvt := as.add(&node{id: ua.NewNumericNodeID(0, ua.ID_BaseVariableType), class: ua.NodeClassVariableType,
		browseName: ua.NewQualifiedName(0, "BaseVariableType"), displayName: ua.NewLocalizedText("BaseVariableType"),
		isAbstract: true, dataType: ua.NewNumericNodeID(0, ua.ID_BaseDataType), valueRank: -2})
	as.link(varTypes, ua.ID_Organizes, bvt)
	b.variableType(ua.ID_BaseDataVariableType, "BaseDataVariableType", ua.ID_BaseVariableType, ua.ID_BaseDataType, false)
	b.variableType(ua.ID_PropertyType, "PropertyType", ua.ID_BaseVariableType, ua.ID_BaseDataType, false)
	b.variableType(ua.ID_DataItemType, "DataItemType", ua.ID_BaseDataVariableType, ua.ID_BaseDataType, false)
	b.variableType(ua.ID_AnalogItemType, "AnalogItemType", ua.ID_DataItemType, ua.ID_Number, false)
	b.variableType(ua.ID_ServerStatusType, "ServerStatusType", ua.ID_BaseDataVariableType, ua.ID_ServerStatusDataType, false)
	b.variableType(ua.ID_BuildInfoType, "BuildInfoType", ua.ID_BaseDataVariableType, ua.ID_BuildInfo, false)

	bdt := as.add(&node{id: ua.NewNumericNodeID(0, ua.ID_BaseDataType), class: ua.NodeClassDataType,
		browseName: ua.NewQualifiedName(0, "BaseDataType"), displayName: ua.NewLocalizedText("BaseDataType"), isAbstract: true})
	as.link(dataTypes, ua.ID_Organizes, bdt)
	b.dataTypeNode(ua.ID_Number, "Number", ua.ID_BaseDataType, true)
	b.dataTypeNode(ua.ID_Integer, "Integer", ua.ID_Number, true)
	b.dataTypeNode(ua.ID_UInteger, "UInteger", ua.ID_Number, true)
	b.dataTypeNode(ua.ID_Structure, "Structure", ua.ID_BaseDataType, true)
	b.dataTypeNode(ua.ID_Enumeration, "Enumeration", ua.ID_BaseDataType, true)
	for t := ua.TypeBoolean; t <= ua.TypeDiagnosticInfo; t++ {
		super := uint32(ua.ID_BaseDataType)
		switch t {
		case ua.TypeSByte, ua.TypeInt16, ua.TypeInt32, ua.TypeInt64:
			super = ua.ID_Integer
		case ua.TypeByte, ua.TypeUInt16, ua.TypeUInt32, ua.TypeUInt64:
			super = ua.ID_UInteger
		case ua.TypeFloat, ua.TypeDouble:
			super = ua.ID_Number
		case ua.TypeExtensionObject, ua.TypeVariant:
			continue // Structure is i=22, BaseDataType i=24
		}
		b.dataTypeNode(uint32(t), t.String(), super, false)
	}
	b.dataTypeNode(ua.ID_Duration, "Duration", uint32(ua.TypeDouble), false)
	b.dataTypeNode(ua.ID_UtcTime, "UtcTime", uint32(ua.TypeDateTime), false)
	for _, st := range []struct {
		id   uint32
		name string
	}{{ua.ID_Argument, "Argument"}, {ua.ID_BuildInfo, "BuildInfo"}, {ua.ID_ServerStatusDataType, "ServerStatusDataType"},
		{ua.ID_Range, "Range"}, {ua.ID_EUInformation, "EUInformation"}} {
		b.dataTypeNode(st.id, st.name, ua.ID_Structure, false)
	}
	b.dataTypeNode(ua.ID_ServerState, "ServerState", ua.ID_Enumeration, false)
}

// builtinDataType returns the built-in type a DataType node stands for
// (through its supertypes: Duration is a Double), or TypeNull.
func builtinDataType(as *addressSpace, dt ua.NodeID) ua.TypeID {
	n := as.get(dt)
	for ; n != nil; n = n.supertype {
		if n.id.Namespace == 0 && n.id.Type == ua.IDNumeric && n.id.Numeric == ua.ID_BaseDataType {
			return ua.TypeNull // any type
		}
		if n.id.Namespace == 0 && n.id.Type == ua.IDNumeric && n.id.Numeric >= 1 && n.id.Numeric <= 25 {
			return ua.TypeID(n.id.Numeric)
		}
		if n.id.Namespace == 0 && n.id.Numeric == ua.ID_Structure {
			return ua.TypeExtensionObject
		}
		if n.id.Namespace == 0 && n.id.Numeric == ua.ID_Enumeration {
			return ua.TypeInt32
		}
	}
	return ua.TypeNull
}
