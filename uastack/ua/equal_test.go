package ua

import (
	"math"
	"testing"
)

func TestVariantEqual(t *testing.T) {
	nan := math.NaN()
	guid := MustGuid("72962b91-fa75-4ae6-8d28-b404dc7daf63")
	m1, _ := NewMatrixVariant([]int32{1, 2, 3, 4}, []int32{2, 2})
	m2, _ := NewMatrixVariant([]int32{1, 2, 3, 4}, []int32{4, 1})
	byteArr, _ := NewArrayVariant(TypeByte, []byte{1, 2})
	eo := NewExtensionObject(&Range{Low: 1, High: 2})
	eo2 := NewExtensionObject(&Range{Low: 1, High: 3})
	cases := []struct {
		name string
		a, b Variant
		want bool
	}{
		{"null", Variant{}, Variant{}, true},
		{"int32", NewInt32Variant(5), NewInt32Variant(5), true},
		{"int32 differs", NewInt32Variant(5), NewInt32Variant(6), false},
		{"int32 vs int64", NewInt32Variant(5), NewInt64Variant(5), false},
		{"uint32 vs int32 same bits", NewUInt32Variant(5), NewInt32Variant(5), false},
		{"double", NewDoubleVariant(1.5), NewDoubleVariant(1.5), true},
		{"NaN equals NaN", NewDoubleVariant(nan), NewDoubleVariant(-nan), true},
		{"NaN vs number", NewDoubleVariant(nan), NewDoubleVariant(0), false},
		{"0 equals -0", NewDoubleVariant(0), NewDoubleVariant(math.Copysign(0, -1)), true},
		{"float NaN", NewFloatVariant(float32(nan)), NewFloatVariant(float32(nan)), true},
		{"string", NewStringVariant("a"), NewStringVariant("a"), true},
		{"string differs", NewStringVariant("a"), NewStringVariant("b"), false},
		{"string vs xml", NewStringVariant("a"), MustVariant(XmlElement("a")), false},
		{"bool", NewBooleanVariant(true), NewBooleanVariant(true), true},
		{"guid", MustVariant(guid), MustVariant(guid), true},
		{"bytestring", MustVariant([]byte{1}), MustVariant([]byte{1}), true},
		{"null vs empty bytestring", MustVariant([]byte(nil)), MustVariant([]byte{}), false},
		{"bytestring vs byte array", MustVariant([]byte{1, 2}), byteArr, false},
		{"node id", MustVariant(NewStringNodeID(2, "x")), MustVariant(NewStringNodeID(2, "x")), true},
		{"node id differs", MustVariant(NewStringNodeID(2, "x")), MustVariant(NewStringNodeID(3, "x")), false},
		{"localized text", MustVariant(NewLocalizedText("a")), MustVariant(LocalizedText{Locale: "en", Text: "a"}), false},
		{"array", MustVariant([]float64{1, nan}), MustVariant([]float64{1, nan}), true},
		{"array length", MustVariant([]float64{1}), MustVariant([]float64{1, 2}), false},
		{"array vs scalar", MustVariant([]int32{1}), NewInt32Variant(1), false},
		{"string array", MustVariant([]string{"a", "b"}), MustVariant([]string{"a", "b"}), true},
		{"matrix", m1, m1, true},
		{"matrix dims", m1, m2, false},
		{"variant array", MustVariant([]Variant{NewInt32Variant(1), NewStringVariant("x")}),
			MustVariant([]Variant{NewInt32Variant(1), NewStringVariant("x")}), true},
		{"variant array differs", MustVariant([]Variant{NewInt32Variant(1)}), MustVariant([]Variant{NewInt32Variant(2)}), false},
		{"data value", MustVariant(&DataValue{Value: NewInt32Variant(1), Status: StatusBadNodeIdUnknown}),
			MustVariant(&DataValue{Value: NewInt32Variant(1), Status: StatusBadNodeIdUnknown}), true},
		{"data value status", MustVariant(&DataValue{Value: NewInt32Variant(1)}),
			MustVariant(&DataValue{Value: NewInt32Variant(1), Status: StatusBadNodeIdUnknown}), false},
		{"extension object", MustVariant(&eo), MustVariant(&eo), true},
		{"extension object body", MustVariant(&eo), MustVariant(&eo2), false},
		{"diagnostic info", MustVariant(&DiagnosticInfo{Mask: DiagHasSymbolicID, SymbolicID: 1, InnerDiagnosticInfo: &DiagnosticInfo{}}),
			MustVariant(&DiagnosticInfo{Mask: DiagHasSymbolicID, SymbolicID: 1, InnerDiagnosticInfo: &DiagnosticInfo{}}), true},
		{"diagnostic info inner", MustVariant(&DiagnosticInfo{Mask: DiagHasSymbolicID, SymbolicID: 1, InnerDiagnosticInfo: &DiagnosticInfo{}}),
			MustVariant(&DiagnosticInfo{Mask: DiagHasSymbolicID, SymbolicID: 1}), false},
	}
	for _, c := range cases {
		if got := c.a.Equal(&c.b); got != c.want {
			t.Errorf("%s: %v.Equal(%v) = %v, want %v", c.name, c.a, c.b, got, c.want)
		}
		if got := c.b.Equal(&c.a); got != c.want {
			t.Errorf("%s: not symmetric", c.name)
		}
	}
}

func TestExceedsDeadband(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name      string
		last, cur Variant
		kind      DeadbandType
		value     float64
		want      bool
	}{
		{"none: same", NewDoubleVariant(1), NewDoubleVariant(1), DeadbandTypeNone, 0, false},
		{"none: changed", NewDoubleVariant(1), NewDoubleVariant(1.0001), DeadbandTypeNone, 0, true},
		{"absolute: within", NewDoubleVariant(1), NewDoubleVariant(1.4), DeadbandTypeAbsolute, 0.5, false},
		{"absolute: at the bound", NewDoubleVariant(1), NewDoubleVariant(1.5), DeadbandTypeAbsolute, 0.5, false},
		{"absolute: beyond", NewDoubleVariant(1), NewDoubleVariant(1.6), DeadbandTypeAbsolute, 0.5, true},
		{"absolute: negative move", NewInt32Variant(10), NewInt32Variant(4), DeadbandTypeAbsolute, 5, true},
		{"absolute: uint64", NewVariantOf(uint64(10)), NewVariantOf(uint64(12)), DeadbandTypeAbsolute, 5, false},
		{"absolute 0: any change", NewInt32Variant(1), NewInt32Variant(2), DeadbandTypeAbsolute, 0, true},
		{"percent: within", NewDoubleVariant(50), NewDoubleVariant(59), DeadbandTypePercent, 10, false},
		{"percent: beyond", NewDoubleVariant(50), NewDoubleVariant(61), DeadbandTypePercent, 10, true},
		{"type change", NewInt32Variant(1), NewDoubleVariant(1), DeadbandTypeAbsolute, 5, true},
		{"NaN stays", NewDoubleVariant(nan), NewDoubleVariant(nan), DeadbandTypeAbsolute, 1, false},
		{"to NaN", NewDoubleVariant(1), NewDoubleVariant(nan), DeadbandTypeAbsolute, 1, true},
		{"from NaN", NewDoubleVariant(nan), NewDoubleVariant(1), DeadbandTypeAbsolute, 1, true},
		{"string: same", NewStringVariant("a"), NewStringVariant("a"), DeadbandTypeAbsolute, 1, false},
		{"string: changed", NewStringVariant("a"), NewStringVariant("b"), DeadbandTypeAbsolute, 1, true},
		{"array: within", MustVariant([]float64{1, 2}), MustVariant([]float64{1.5, 2.5}), DeadbandTypeAbsolute, 1, false},
		{"array: one beyond", MustVariant([]float64{1, 2}), MustVariant([]float64{1.5, 3.5}), DeadbandTypeAbsolute, 1, true},
		{"array: length", MustVariant([]int16{1, 2}), MustVariant([]int16{1}), DeadbandTypeAbsolute, 1, true},
		{"array: int", MustVariant([]int16{1, 2}), MustVariant([]int16{2, 3}), DeadbandTypeAbsolute, 1, false},
		{"array vs scalar", MustVariant([]int32{1}), NewInt32Variant(1), DeadbandTypeAbsolute, 1, true},
	}
	for _, c := range cases {
		if got := ExceedsDeadband(&c.last, &c.cur, c.kind, c.value, 0, 100); got != c.want {
			t.Errorf("%s: ExceedsDeadband(%v, %v, %v, %v) = %v, want %v", c.name, c.last, c.cur, c.kind, c.value, got, c.want)
		}
	}
	// Percent of an EURange of 200..400: 10% is 20.
	a, b := NewDoubleVariant(300), NewDoubleVariant(315)
	if ExceedsDeadband(&a, &b, DeadbandTypePercent, 10, 200, 400) {
		t.Error("15 within 10% of 200..400")
	}
	b.SetDouble(321)
	if !ExceedsDeadband(&a, &b, DeadbandTypePercent, 10, 400, 200) {
		t.Error("21 beyond 10% of 400..200")
	}
}

// NewVariantOf is MustVariant for table literals.
func NewVariantOf(x any) Variant { return MustVariant(x) }

func TestVariantClone(t *testing.T) {
	m, _ := NewMatrixVariant([]int32{1, 2, 3, 4}, []int32{2, 2})
	eo := NewExtensionObject(&Range{Low: 1, High: 2})
	vals := []Variant{
		NewDoubleVariant(1), NewStringVariant("s"), MustVariant([]byte{1, 2}), MustVariant([]float64{1, 2}),
		MustVariant([][]byte{{1}, nil}), m, MustVariant([]Variant{MustVariant([]int32{7})}),
		MustVariant(&DataValue{Value: MustVariant([]string{"a"})}), MustVariant(&eo),
		MustVariant(&DiagnosticInfo{Mask: DiagHasSymbolicID, SymbolicID: 3, InnerDiagnosticInfo: &DiagnosticInfo{Mask: 1}}),
	}
	for _, v := range vals {
		c := v.Clone()
		if !c.Equal(&v) {
			t.Errorf("clone of %v differs: %v", v, c)
		}
	}
	// The copy shares nothing mutable.
	a := MustVariant([]float64{1, 2})
	c := a.Clone()
	c.Value().([]float64)[0] = 9
	if a.Value().([]float64)[0] != 1 {
		t.Error("clone shares the array")
	}
	c = m.Clone()
	c.ArrayDimensions()[0] = 4
	if m.ArrayDimensions()[0] != 2 {
		t.Error("clone shares the dimensions")
	}
	c = vals[8].Clone()
	c.Value().(*ExtensionObject).Value.(*Range).High = 7
	if eo.Value.(*Range).High != 2 {
		t.Error("clone shares the extension object's value")
	}
	dv := DataValue{Value: MustVariant([]byte{5}), Status: StatusUncertain}
	dc := dv.Clone()
	dc.Value.Value().([]byte)[0] = 6
	if !dc.Equal(&DataValue{Value: MustVariant([]byte{6}), Status: StatusUncertain}) || dv.Value.Value().([]byte)[0] != 5 {
		t.Error("DataValue.Clone shares its ByteString")
	}
}

// TestBorrowedRule checks the rule in the package documentation: values copied out
// of a decoded notification (strings, arrays, byte strings) survive its Release
// and the next decode into the same response.
func TestBorrowedRule(t *testing.T) {
	mk := func(s string, f float64, b byte) []byte {
		dcn := &DataChangeNotification{MonitoredItems: []MonitoredItemNotification{
			{ClientHandle: 1, Value: DataValue{Value: NewStringVariant(s)}},
			{ClientHandle: 2, Value: DataValue{Value: MustVariant([]float64{f, f})}},
			{ClientHandle: 3, Value: DataValue{Value: MustVariant([]byte{b, b})}},
			{ClientHandle: 4, Value: DataValue{Value: MustVariant([]Variant{NewStringVariant(s)})}},
		}}
		e := NewEncoder(nil)
		e.WriteStructure(&PublishResponse{NotificationMessage: NotificationMessage{
			SequenceNumber: 1, NotificationData: []ExtensionObject{NewExtensionObject(dcn)}}})
		return e.Bytes()
	}
	first, second := mk("first", 1, 1), mk("other", 2, 2)
	var r PublishResponse
	d := NewDecoder(first, nil)
	if _, err := d.ReadStructure(&r); err != nil {
		t.Fatal(err)
	}
	items := r.NotificationMessage.NotificationData[0].Value.(*DataChangeNotification).MonitoredItems
	kept := make([]DataValue, len(items))
	want := make([]DataValue, len(items))
	for i := range items {
		kept[i] = items[i].Value         // a plain copy, as a handler keeps it
		want[i] = items[i].Value.Clone() // the reference
	}
	r.Release()
	for range 3 { // the pool hands the same notification out again
		d.Reset(second, nil)
		if _, err := d.ReadStructure(&r); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	for i := range kept {
		if !kept[i].Equal(&want[i]) {
			t.Errorf("item %d: kept %v, was %v", i, kept[i].Value, want[i].Value)
		}
	}
}
