package server

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

// Generator is how a simulated variable's value moves: one step per period.
type Generator uint8

// Generators. Each computes the value of tick n (the n-th period since the
// server started) from n alone, so sampling costs a division and, only when
// the tick moved, the value.
const (
	// GeneratorCounter counts the ticks: 0, 1, 2 … (wrapping in small types).
	GeneratorCounter Generator = iota + 1
	// GeneratorSine is a sine of amplitude 100 and a period of 60 ticks.
	GeneratorSine
	// GeneratorRandom is uniformly distributed in [0, 100).
	GeneratorRandom
	// GeneratorStep climbs 0, 10 … 90 and starts over.
	GeneratorStep
)

var generatorNames = [...]string{GeneratorCounter: "counter", GeneratorSine: "sine", GeneratorRandom: "random", GeneratorStep: "step"}

func (g Generator) String() string {
	if int(g) < len(generatorNames) && generatorNames[g] != "" {
		return generatorNames[g]
	}
	return fmt.Sprintf("Generator(%d)", uint8(g))
}

// ParseGenerator parses "counter", "sine", "random" or "step".
func ParseGenerator(s string) (Generator, error) {
	for g, name := range generatorNames {
		if name != "" && strings.EqualFold(s, name) {
			return Generator(g), nil
		}
	}
	return 0, fmt.Errorf("server: unknown generator %q (counter, sine, random, step)", s)
}

// ScalarTypes are the built-in types a simulated variable can have: all but
// ExtensionObject, DataValue, Variant and DiagnosticInfo, which are not the
// value of a plain variable.
var ScalarTypes = []ua.TypeID{
	ua.TypeBoolean, ua.TypeSByte, ua.TypeByte, ua.TypeInt16, ua.TypeUInt16, ua.TypeInt32,
	ua.TypeUInt32, ua.TypeInt64, ua.TypeUInt64, ua.TypeFloat, ua.TypeDouble, ua.TypeString,
	ua.TypeDateTime, ua.TypeGuid, ua.TypeByteString, ua.TypeXmlElement, ua.TypeNodeID,
	ua.TypeExpandedNodeID, ua.TypeStatusCode, ua.TypeQualifiedName, ua.TypeLocalizedText,
}

// maxSimVariables bounds the Load variables (about 1 KiB of memory each).
const maxSimVariables = 2_000_000

// SimConfig configures the simulated address space.
//
// Demo (ns=1;s=Demo) has fixed, named nodes for tests and demos (see the Node…
// constants). Load (ns=1;s=Load) has Folders folders of Variables variables
// each, for load: variable v of folder f has type Types[v%len(Types)],
// generator Generators[(v/len(Types))%len(Generators)] and period
// Rates[f%len(Rates)]; its node id is LoadNode(f, v).
type SimConfig struct {
	// DemoRate is the period of the generators in Demo; default 100 ms.
	DemoRate time.Duration
	// Folders and Variables size Load; default 10 × 100. Negative: none.
	Folders   int
	Variables int
	// Rates are the generator periods of the Load folders; default 1 s.
	Rates []time.Duration
	// Types of the Load variables; default ScalarTypes.
	Types []ua.TypeID
	// Generators of the Load variables; default all four.
	Generators []Generator
	// AlarmSources is the number of alarm sources below ns=1;s=Alarms
	// (default 3), and AlarmInterval the period at which one of them changes
	// state, raising an event (default 2 s; negative: only on demand, through
	// the GenerateEvent method).
	AlarmSources  int
	AlarmInterval time.Duration
	// History, when positive, makes every generated variable (Demo's and
	// Load's) Historizing, readable with HistoryRead (ReadRawModifiedDetails)
	// for the values of the last History: the generators compute any tick's
	// value, so nothing is stored.
	History time.Duration
	// Stagger spreads the ticks of the Load folders over their period:
	// folder f's generators start f/Folders of a period later, so that the
	// values of a rate change evenly through it instead of all at one
	// instant (SourceTimestamp is still each value's tick). Off, every
	// Load variable of a rate changes at the same instant: a burst.
	Stagger bool
}

// HistorizingCounters is a simulation of counters Int32 counters in one
// folder (LoadNode(0, i)), each +1 every period, with history kept for a
// minute and no alarms: what the backfill and restart tests read.
func HistorizingCounters(counters int, period time.Duration) SimConfig {
	return SimConfig{Folders: 1, Variables: counters, Rates: []time.Duration{period},
		Types: []ua.TypeID{ua.TypeInt32}, Generators: []Generator{GeneratorCounter}, AlarmSources: -1,
		History: time.Minute}
}

func (c *SimConfig) resolve() error {
	if c.DemoRate < 0 {
		return fmt.Errorf("server: Config.Sim.DemoRate %v is negative", c.DemoRate)
	}
	if c.DemoRate == 0 {
		c.DemoRate = 100 * time.Millisecond
	}
	if c.Folders == 0 {
		c.Folders = 10
	}
	if c.Variables == 0 {
		c.Variables = 100
	}
	if c.Folders < 0 || c.Variables < 0 {
		c.Folders, c.Variables = 0, 0
	}
	if c.Folders > maxSimVariables || c.Variables > maxSimVariables || c.Folders*c.Variables > maxSimVariables {
		return fmt.Errorf("server: Config.Sim: %d × %d variables, at most %d", c.Folders, c.Variables, maxSimVariables)
	}
	if len(c.Rates) == 0 {
		c.Rates = []time.Duration{time.Second}
	}
	c.Rates = append([]time.Duration(nil), c.Rates...)
	for i, r := range c.Rates {
		if r < time.Millisecond {
			return fmt.Errorf("server: Config.Sim.Rates[%d] %v: at least 1 ms", i, r)
		}
	}
	if len(c.Types) == 0 {
		c.Types = ScalarTypes
	}
	c.Types = append([]ua.TypeID(nil), c.Types...)
	for i, t := range c.Types {
		if !isScalarType(t) {
			return fmt.Errorf("server: Config.Sim.Types[%d]: %s cannot be simulated", i, t)
		}
	}
	if len(c.Generators) == 0 {
		c.Generators = []Generator{GeneratorCounter, GeneratorSine, GeneratorRandom, GeneratorStep}
	}
	c.Generators = append([]Generator(nil), c.Generators...)
	for i, g := range c.Generators {
		if g < GeneratorCounter || g > GeneratorStep {
			return fmt.Errorf("server: Config.Sim.Generators[%d]: unknown generator %d", i, g)
		}
	}
	if c.AlarmSources == 0 {
		c.AlarmSources = 3
	}
	if c.AlarmSources < 0 {
		c.AlarmSources = 0
	}
	if c.AlarmSources > 1000 {
		return fmt.Errorf("server: Config.Sim.AlarmSources %d: at most 1000", c.AlarmSources)
	}
	if c.AlarmInterval == 0 {
		c.AlarmInterval = 2 * time.Second
	}
	return nil
}

func isScalarType(t ua.TypeID) bool {
	for _, s := range ScalarTypes {
		if s == t {
			return true
		}
	}
	return false
}

// Node ids of the simulation (namespace 1).
const (
	NodeDemo         = "ns=1;s=Demo"
	NodeCounter      = "ns=1;s=Demo.Counter"  // Double counter, every DemoRate
	NodeSine         = "ns=1;s=Demo.Sine"     // Double sine, AnalogItem with EURange [-100, 100]
	NodeRandom       = "ns=1;s=Demo.Random"   // Double random, AnalogItem with EURange [0, 100]
	NodeStep         = "ns=1;s=Demo.Step"     // Int32 step
	NodeSetpoint     = "ns=1;s=Demo.Setpoint" // Double, writable, AnalogItem with EURange [0, 1000]
	NodeBad          = "ns=1;s=Demo.Quality.Bad"
	NodeUncertain    = "ns=1;s=Demo.Quality.Uncertain"
	NodeFlapping     = "ns=1;s=Demo.Quality.Flapping" // Good, Uncertain, Bad in turn
	NodeDoubleMatrix = "ns=1;s=Demo.Arrays.DoubleMatrix"
	NodeInt32Matrix  = "ns=1;s=Demo.Arrays.Int32Matrix"
	NodeMethods      = "ns=1;s=Demo.Methods"
	NodeAdd          = "ns=1;s=Demo.Methods.Add"           // Add(a Double, b Double) -> Double
	NodeMultiply     = "ns=1;s=Demo.Methods.Multiply"      // Multiply(a Int32, b Int32) -> Int32
	NodeEcho         = "ns=1;s=Demo.Methods.Echo"          // Echo(s String) -> String
	NodeFail         = "ns=1;s=Demo.Methods.Fail"          // Fail(code StatusCode): returns code
	NodeGenerate     = "ns=1;s=Demo.Methods.GenerateEvent" // GenerateEvent(severity UInt16, message String)
	NodeAlarms       = "ns=1;s=Alarms"                     // event notifier of the alarm sources
	NodeLoad         = "ns=1;s=Load"
)

// StaticNode returns the node id of the writable variable of type t in
// Demo/Static (ns=1;s=Demo.Static.<Type>); with array set, of the writable
// one-dimensional array (…Static.<Type>Array).
func StaticNode(t ua.TypeID, array bool) string {
	if array {
		return "ns=1;s=Demo.Static." + t.String() + "Array"
	}
	return "ns=1;s=Demo.Static." + t.String()
}

// DynamicNode returns the node id of the counter of type t in Demo/Dynamic.
func DynamicNode(t ua.TypeID) string { return "ns=1;s=Demo.Dynamic." + t.String() }

// ArrayNode returns the node id of the counter array (10 elements) of type t in
// Demo/Arrays.
func ArrayNode(t ua.TypeID) string { return "ns=1;s=Demo.Arrays." + t.String() + "Array" }

// AlarmSourceNode returns the node id of alarm source i (from 1).
func AlarmSourceNode(i int) string { return fmt.Sprintf("ns=1;s=Alarms.Tank%d", i) }

// LoadNode returns the node id of variable v of Load folder f.
func LoadNode(f, v int) string { return fmt.Sprintf("ns=1;s=Load.F%03d.V%05d", f, v) }

// statusPattern gives a simulated variable's status by tick.
type statusPattern uint8

const (
	statusGood statusPattern = iota
	statusBad
	statusUncertain
	statusFlapping
)

func (p statusPattern) at(n int64) ua.StatusCode {
	switch p {
	case statusBad:
		return ua.StatusBadSensorFailure
	case statusUncertain:
		return ua.StatusUncertainLastUsableValue
	case statusFlapping:
		switch n % 3 {
		case 1:
			return ua.StatusUncertainSensorNotAccurate
		case 2:
			return ua.StatusBadCommunicationError
		}
	}
	return ua.StatusGood
}

// generator computes a simulated variable's value for tick n.
type generator struct {
	kind   Generator
	typ    ua.TypeID
	period int64 // ns
	start  int64 // Unix ns of tick 0
	seed   uint64
	status statusPattern
	// table holds the values of the types a Variant does not store inline, and
	// of arrays: the value of tick n is table[n%len(table)]. Built once, shared
	// by every sample: nothing is allocated when sampling.
	table []ua.Variant
}

const (
	simAmplitude = 100.0
	sineTicks    = 60
	stepCount    = 10
)

// tickAt returns the tick of Unix time now (ns).
func (g *generator) tickAt(now int64) int64 {
	if now <= g.start {
		return 0
	}
	return (now - g.start) / g.period
}

// tickTime returns the DateTime at which tick n began.
func (g *generator) tickTime(n int64) ua.DateTime {
	return unixToDateTime(g.start + n*g.period)
}

// sample writes the value of tick n into dv (value, status, source timestamp).
func (g *generator) sample(n int64, dv *ua.DataValue) {
	dv.SourceTimestamp = g.tickTime(n)
	dv.Status = g.status.at(n)
	if g.status == statusBad {
		dv.Value = ua.Variant{}
		return
	}
	if g.table != nil {
		dv.Value = g.table[int(n%int64(len(g.table)))]
		return
	}
	g.scalar(n, &dv.Value)
}

// number is the generator's value of tick n as a float.
func (g *generator) number(n int64) float64 {
	switch g.kind {
	case GeneratorSine:
		return simAmplitude * math.Sin(2*math.Pi*float64(n%sineTicks)/sineTicks)
	case GeneratorRandom:
		return float64(splitmix(g.seed+uint64(n))>>11) / (1 << 53) * simAmplitude
	case GeneratorStep:
		return float64(n%stepCount) * simAmplitude / stepCount
	}
	return float64(n)
}

// integer is the generator's value of tick n as an integer: the counter is
// exact (and wraps in the type), the others are rounded.
func (g *generator) integer(n int64) int64 {
	if g.kind == GeneratorCounter {
		return n
	}
	return int64(math.Round(g.number(n)))
}

// scalar sets v to the inline scalar of tick n.
func (g *generator) scalar(n int64, v *ua.Variant) {
	switch g.typ {
	case ua.TypeBoolean:
		var b bool
		switch g.kind {
		case GeneratorCounter:
			b = n&1 == 1
		case GeneratorSine:
			b = g.number(n) > 0
		default:
			b = g.number(n) >= simAmplitude/2
		}
		v.SetBoolean(b)
	case ua.TypeSByte:
		v.SetSByte(int8(g.integer(n)))
	case ua.TypeByte:
		v.SetByte(byte(g.integer(n)))
	case ua.TypeInt16:
		v.SetInt16(int16(g.integer(n)))
	case ua.TypeUInt16:
		v.SetUInt16(uint16(g.integer(n)))
	case ua.TypeInt32:
		v.SetInt32(int32(g.integer(n)))
	case ua.TypeUInt32:
		v.SetUInt32(uint32(g.integer(n)))
	case ua.TypeInt64:
		v.SetInt64(g.integer(n))
	case ua.TypeUInt64:
		v.SetUInt64(uint64(g.integer(n)))
	case ua.TypeFloat:
		v.SetFloat(float32(g.number(n)))
	case ua.TypeDouble:
		v.SetDouble(g.number(n))
	case ua.TypeDateTime:
		v.SetDateTime(g.tickTime(n))
	case ua.TypeStatusCode:
		v.SetStatusCode(simStatusCodes[n%int64(len(simStatusCodes))])
	default:
		*v = ua.Variant{}
	}
}

var simStatusCodes = []ua.StatusCode{ua.StatusGood, ua.StatusUncertainLastUsableValue, ua.StatusBadSensorFailure, ua.StatusGoodClamped}

// inlineType reports whether a Variant stores a scalar of t without a table.
func inlineType(t ua.TypeID) bool {
	switch t {
	case ua.TypeBoolean, ua.TypeSByte, ua.TypeByte, ua.TypeInt16, ua.TypeUInt16, ua.TypeInt32,
		ua.TypeUInt32, ua.TypeInt64, ua.TypeUInt64, ua.TypeFloat, ua.TypeDouble, ua.TypeDateTime, ua.TypeStatusCode:
		return true
	}
	return false
}

// newGenerator makes the generator of a variable. arrayLen > 0 makes an array
// generator; dims, when set, a matrix of those dimensions.
func newGenerator(kind Generator, t ua.TypeID, period time.Duration, start int64, seed uint64, arrayLen int, dims []int32) *generator {
	g := &generator{kind: kind, typ: t, period: int64(period), start: start, seed: seed}
	switch {
	case arrayLen > 0 || len(dims) > 0:
		g.table = arrayTable(g, arrayLen, dims)
	case !inlineType(t):
		g.table = scalarTable(g, t)
	}
	return g
}

// scalarTable builds the table of a type that is not stored inline.
func scalarTable(g *generator, t ua.TypeID) []ua.Variant {
	out := make([]ua.Variant, defaultSimTableSize)
	for i := range out {
		n := int64(i)
		k := g.integer(n)
		switch t {
		case ua.TypeString:
			out[i].SetString(fmt.Sprintf("%s %d", g.kind, k))
		case ua.TypeXmlElement:
			out[i].SetXmlElement(ua.XmlElement(fmt.Sprintf("<Value kind=%q>%d</Value>", g.kind.String(), k)))
		case ua.TypeGuid:
			var id ua.Guid
			id.Data1 = uint32(k)
			binary.LittleEndian.PutUint64(id.Data4[:], splitmix(g.seed+uint64(k)))
			id.Data2, id.Data3 = 0x5153, 0x4d00
			out[i] = ua.MustVariant(id)
		case ua.TypeByteString:
			b := make([]byte, 8)
			binary.BigEndian.PutUint64(b, uint64(k))
			out[i] = ua.MustVariant(b)
		case ua.TypeNodeID:
			out[i] = ua.MustVariant(ua.NewNumericNodeID(1, uint32(k)))
		case ua.TypeExpandedNodeID:
			out[i] = ua.MustVariant(ua.ExpandedNodeID{NodeID: ua.NewStringNodeID(0, fmt.Sprintf("Sim.%d", k)), NamespaceURI: DefaultNamespaceURI})
		case ua.TypeQualifiedName:
			out[i] = ua.MustVariant(ua.NewQualifiedName(1, fmt.Sprintf("Q%d", k)))
		case ua.TypeLocalizedText:
			out[i] = ua.MustVariant(ua.LocalizedText{Locale: "en", Text: fmt.Sprintf("%s %d", g.kind, k)})
		default:
			g.scalar(n, &out[i])
		}
	}
	return out
}

// arrayTable builds the values of an array (or matrix) generator: element j of
// the value of tick n is the scalar of tick n+j.
func arrayTable(g *generator, n int, dims []int32) []ua.Variant {
	if len(dims) > 0 {
		n = 1
		for _, d := range dims {
			n *= int(d)
		}
	}
	scalars := scalarTable(&generator{kind: g.kind, typ: g.typ, period: g.period, start: g.start, seed: g.seed}, g.typ)
	out := make([]ua.Variant, 16)
	for i := range out {
		elems := make([]ua.Variant, n)
		for j := range elems {
			elems[j] = scalars[(i+j)%len(scalars)]
		}
		flat := flatArray(g.typ, elems)
		var err error
		if len(dims) > 0 {
			out[i], err = ua.NewMatrixVariant(flat, dims)
		} else {
			out[i], err = ua.NewArrayVariant(g.typ, flat)
		}
		if err != nil {
			panic(err) // the types above are all array types
		}
	}
	return out
}

// flatArray converts scalars of type t to the Go slice a Variant array holds.
func flatArray(t ua.TypeID, elems []ua.Variant) any {
	switch t {
	case ua.TypeBoolean:
		return collect(elems, func(v *ua.Variant) bool { return v.Boolean() })
	case ua.TypeSByte:
		return collect(elems, func(v *ua.Variant) int8 { return v.SByte() })
	case ua.TypeByte:
		return collect(elems, func(v *ua.Variant) byte { return v.Byte() })
	case ua.TypeInt16:
		return collect(elems, func(v *ua.Variant) int16 { return v.Int16() })
	case ua.TypeUInt16:
		return collect(elems, func(v *ua.Variant) uint16 { return v.UInt16() })
	case ua.TypeInt32:
		return collect(elems, func(v *ua.Variant) int32 { return v.Int32() })
	case ua.TypeUInt32:
		return collect(elems, func(v *ua.Variant) uint32 { return v.UInt32() })
	case ua.TypeInt64:
		return collect(elems, func(v *ua.Variant) int64 { return v.Int64() })
	case ua.TypeUInt64:
		return collect(elems, func(v *ua.Variant) uint64 { return v.UInt64() })
	case ua.TypeFloat:
		return collect(elems, func(v *ua.Variant) float32 { return v.Float() })
	case ua.TypeDouble:
		return collect(elems, func(v *ua.Variant) float64 { return v.Double() })
	case ua.TypeString:
		return collect(elems, func(v *ua.Variant) string { return v.Str() })
	case ua.TypeXmlElement:
		return collect(elems, func(v *ua.Variant) ua.XmlElement { return ua.XmlElement(v.Str()) })
	case ua.TypeDateTime:
		return collect(elems, func(v *ua.Variant) ua.DateTime { return v.DateTime() })
	case ua.TypeStatusCode:
		return collect(elems, func(v *ua.Variant) ua.StatusCode { return v.StatusCode() })
	case ua.TypeGuid:
		return collect(elems, func(v *ua.Variant) ua.Guid { g, _ := v.Value().(ua.Guid); return g })
	case ua.TypeByteString:
		return collect(elems, func(v *ua.Variant) []byte { b, _ := v.Value().([]byte); return b })
	case ua.TypeNodeID:
		return collect(elems, func(v *ua.Variant) ua.NodeID { x, _ := v.Value().(ua.NodeID); return x })
	case ua.TypeExpandedNodeID:
		return collect(elems, func(v *ua.Variant) ua.ExpandedNodeID { x, _ := v.Value().(ua.ExpandedNodeID); return x })
	case ua.TypeQualifiedName:
		return collect(elems, func(v *ua.Variant) ua.QualifiedName { x, _ := v.Value().(ua.QualifiedName); return x })
	case ua.TypeLocalizedText:
		return collect(elems, func(v *ua.Variant) ua.LocalizedText { x, _ := v.Value().(ua.LocalizedText); return x })
	}
	return nil
}

func collect[T any](elems []ua.Variant, f func(*ua.Variant) T) []T {
	out := make([]T, len(elems))
	for i := range elems {
		out[i] = f(&elems[i])
	}
	return out
}

// zeroValue returns the initial value of a writable variable of type t.
func zeroValue(t ua.TypeID, array bool) ua.Variant {
	g := &generator{kind: GeneratorCounter, typ: t, period: 1, seed: 1}
	if array {
		return arrayTable(g, 3, nil)[0]
	}
	if inlineType(t) {
		var v ua.Variant
		g.scalar(0, &v)
		return v
	}
	return scalarTable(g, t)[0]
}

// splitmix is the SplitMix64 mix function: a cheap, good hash of a counter.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// unixToDateTime converts Unix nanoseconds to a DateTime.
func unixToDateTime(ns int64) ua.DateTime {
	return ua.DateTime(ns/100 + 116444736000000000)
}

// buildSim makes the simulation nodes below Objects.
func (s *Server) buildSim(b *builder) {
	as := b.as
	cfg := &s.cfg.Sim
	objects := as.ns0(ua.ID_ObjectsFolder)
	// Ticks begin on whole DateTime units (100 ns), so that a value's
	// SourceTimestamp names exactly the tick it belongs to.
	start := s.start.UnixNano() / 100 * 100
	seed := uint64(0)
	nextSeed := func() uint64 { seed++; return splitmix(seed) }
	sid := func(s string) ua.NodeID { return ua.NewStringNodeID(1, s) }

	demo := b.folder(objects, sid("Demo"), "Demo")
	genVar := func(parent *node, id, name string, kind Generator, t ua.TypeID, period time.Duration, arrayLen int, dims []int32) *node {
		rank := int32(-1)
		if arrayLen > 0 {
			rank = 1
		}
		if len(dims) > 0 {
			rank = int32(len(dims))
		}
		n := b.variable(parent, sid(id), name, uint32(t), rank, ua.ID_BaseDataVariableType)
		n.gen = newGenerator(kind, t, period, start, nextSeed(), arrayLen, dims)
		n.minSampling = 0
		if cfg.History > 0 {
			n.accessLevel |= accessHistoryRead
		}
		if arrayLen > 0 {
			n.arrayDims = []uint32{uint32(arrayLen)}
		}
		for _, d := range dims {
			n.arrayDims = append(n.arrayDims, uint32(d))
		}
		return n
	}
	rate := cfg.DemoRate
	genVar(demo, "Demo.Counter", "Counter", GeneratorCounter, ua.TypeDouble, rate, 0, nil)
	setAnalog(b, genVar(demo, "Demo.Sine", "Sine", GeneratorSine, ua.TypeDouble, rate, 0, nil), -simAmplitude, simAmplitude)
	setAnalog(b, genVar(demo, "Demo.Random", "Random", GeneratorRandom, ua.TypeDouble, rate, 0, nil), 0, simAmplitude)
	genVar(demo, "Demo.Step", "Step", GeneratorStep, ua.TypeInt32, rate, 0, nil)
	sp := b.variable(demo, sid("Demo.Setpoint"), "Setpoint", uint32(ua.TypeDouble), -1, ua.ID_BaseDataVariableType)
	sp.accessLevel = accessRead | accessWrite
	sp.static = &staticValue{}
	sp.static.store(ua.DataValue{Value: ua.NewDoubleVariant(0), SourceTimestamp: ua.Now()})
	setAnalog(b, sp, 0, 1000)

	static := b.folder(demo, sid("Demo.Static"), "Static")
	dynamic := b.folder(demo, sid("Demo.Dynamic"), "Dynamic")
	arrays := b.folder(demo, sid("Demo.Arrays"), "Arrays")
	for _, t := range ScalarTypes {
		for _, array := range []bool{false, true} {
			name := t.String()
			rank := int32(-1)
			if array {
				name += "Array"
				rank = 1
			}
			n := b.variable(static, sid("Demo.Static."+name), name, uint32(t), rank, ua.ID_BaseDataVariableType)
			n.accessLevel = accessRead | accessWrite
			n.static = &staticValue{}
			n.static.store(ua.DataValue{Value: zeroValue(t, array), SourceTimestamp: ua.Now()})
		}
		genVar(dynamic, "Demo.Dynamic."+t.String(), t.String(), GeneratorCounter, t, rate, 0, nil)
		genVar(arrays, "Demo.Arrays."+t.String()+"Array", t.String()+"Array", GeneratorCounter, t, rate, defaultSimArrayLength, nil)
	}
	genVar(arrays, "Demo.Arrays.DoubleMatrix", "DoubleMatrix", GeneratorSine, ua.TypeDouble, rate, 0, []int32{3, 3})
	genVar(arrays, "Demo.Arrays.Int32Matrix", "Int32Matrix", GeneratorCounter, ua.TypeInt32, rate, 0, []int32{2, 4})

	quality := b.folder(demo, sid("Demo.Quality"), "Quality")
	for _, q := range []struct {
		name string
		p    statusPattern
	}{{"Bad", statusBad}, {"Uncertain", statusUncertain}, {"Flapping", statusFlapping}} {
		n := genVar(quality, "Demo.Quality."+q.name, q.name, GeneratorCounter, ua.TypeDouble, rate, 0, nil)
		n.gen.status = q.p
	}

	s.buildMethods(b, demo)
	s.buildAlarms(b, objects)

	if cfg.Folders > 0 && cfg.Variables > 0 {
		load := b.folder(objects, sid("Load"), "Load")
		for f := 0; f < cfg.Folders; f++ {
			fid := fmt.Sprintf("Load.F%03d", f)
			folder := b.folder(load, sid(fid), fmt.Sprintf("F%03d", f))
			period := cfg.Rates[f%len(cfg.Rates)]
			offset := int64(0)
			if cfg.Stagger && f > 0 {
				// Tick 0 began before the start, never after: no value
				// carries a SourceTimestamp in the future.
				offset = (int64(period)*int64(f)/int64(cfg.Folders) - int64(period)) / 100 * 100
			}
			for v := 0; v < cfg.Variables; v++ {
				t := cfg.Types[v%len(cfg.Types)]
				kind := cfg.Generators[(v/len(cfg.Types))%len(cfg.Generators)]
				n := genVar(folder, fmt.Sprintf("%s.V%05d", fid, v), fmt.Sprintf("V%05d", v), kind, t, period, 0, nil)
				n.gen.start += offset
			}
		}
	}
}

// setAnalog makes n an AnalogItem with an EURange property.
func setAnalog(b *builder, n *node, low, high float64) {
	n.euRange = &ua.Range{Low: low, High: high}
	// Replace the HasTypeDefinition the builder added.
	for i := range n.refs {
		r := &n.refs[i]
		if r.forward && r.typ.id.Numeric == ua.ID_HasTypeDefinition {
			old := r.target
			for j := range old.refs {
				if !old.refs[j].forward && old.refs[j].target == n && old.refs[j].typ == r.typ {
					old.refs = append(old.refs[:j], old.refs[j+1:]...)
					break
				}
			}
			n.refs = append(n.refs[:i], n.refs[i+1:]...)
			break
		}
	}
	b.as.link(n, ua.ID_HasTypeDefinition, b.as.ns0(ua.ID_AnalogItemType))
	b.constant(n, ua.NewStringNodeID(n.id.Namespace, n.id.Text+".EURange"), "EURange", ua.ID_Range, -1, ua.ID_PropertyType,
		ua.MustVariant(ua.NewExtensionObject(&ua.Range{Low: low, High: high})))
}

func timeNowUnix() int64 { return time.Now().UnixNano() }
