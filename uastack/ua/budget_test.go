package ua

import (
	"errors"
	"runtime"
	"testing"
)

// hostileCallRequest is a CallRequest of one method call whose InputArguments
// declare n elements, each a null Variant (one byte on the wire, 48 bytes decoded):
// with n = 1<<20 a 1 MiB message that, without the budget, would make the decoder
// allocate 48 MiB.
func hostileCallRequest(n int) []byte {
	e := NewEncoder(nil)
	e.WriteNodeID(NewNumericNodeID(0, ID_CallRequest_Encoding_DefaultBinary))
	hdr := RequestHeader{RequestHandle: 1, TimeoutHint: 1000}
	hdr.Encode(e)
	e.WriteInt32(1) // MethodsToCall
	e.WriteNodeID(NewNumericNodeID(0, ID_Server))
	e.WriteNodeID(NewNumericNodeID(0, ID_Server_GetMonitoredItems))
	e.WriteInt32(int32(n))      // InputArguments
	e.WriteRaw(make([]byte, n)) // n null Variants
	return e.Bytes()
}

// decodeAllocated decodes b with ReadStructure and returns the error and the bytes
// the process allocated meanwhile.
func decodeAllocated(d *Decoder, b []byte, lim *Limits) (uint64, error) {
	var ms0, ms1 runtime.MemStats
	d.Reset(b, lim)
	runtime.ReadMemStats(&ms0)
	_, err := d.ReadStructure(nil)
	runtime.ReadMemStats(&ms1)
	return ms1.TotalAlloc - ms0.TotalAlloc, err
}

// TestMemoryBudgetHostileArray: the 48× message is refused with the typed error
// before the allocation, and allowed through by a budget that covers it, the charge
// then bounding what was really allocated.
func TestMemoryBudgetHostileArray(t *testing.T) {
	b := hostileCallRequest(1 << 20)
	d := NewDecoder(nil, nil)
	got, err := decodeAllocated(d, b, nil)
	t.Logf("%d-byte message, budget %d: %v, %d bytes allocated", len(b), d.MemoryBudget(), err, got)
	if !errors.Is(err, ErrMemoryBudgetExceeded) || !errors.Is(err, StatusBadEncodingLimitsExceeded) {
		t.Fatalf("err = %v, want ErrMemoryBudgetExceeded", err)
	}
	if got > 64<<10 {
		t.Errorf("refusing the message allocated %d bytes", got)
	}
	if d.MemoryBudget() != DefaultMemoryPerByte*len(b)+DefaultMemoryAllowance {
		t.Errorf("budget %d, want %d × %d + %d", d.MemoryBudget(), DefaultMemoryPerByte, len(b), DefaultMemoryAllowance)
	}

	// Zero limits mean the defaults.
	var zero Limits = DefaultLimits
	zero.MemoryPerByte, zero.MemoryAllowance = 0, 0
	if _, err := decodeAllocated(d, b, &zero); !errors.Is(err, ErrMemoryBudgetExceeded) {
		t.Fatalf("zero memory limits: err = %v, want ErrMemoryBudgetExceeded", err)
	}

	lim := DefaultLimits
	lim.MemoryPerByte = 64
	got, err = decodeAllocated(d, b, &lim)
	t.Logf("budget %d: %v, %d bytes allocated, %d charged", d.MemoryBudget(), err, got, d.MemoryCharged())
	if err != nil {
		t.Fatalf("with 64 bytes per byte: %v", err)
	}
	if got < 48<<20 || got > uint64(d.MemoryCharged()) {
		t.Errorf("allocated %d bytes, charged %d: the charge must bound the allocation (and the array is 48 MiB)", got, d.MemoryCharged())
	}
}

// TestMemoryBudgetEachSite: every place the decoder allocates from a declared
// length charges the budget, and those that expand the wire bytes (more memory than
// input) refuse what exceeds it, with the typed error.
func TestMemoryBudgetEachSite(t *testing.T) {
	tight := DefaultLimits
	tight.MemoryPerByte, tight.MemoryAllowance = 1, 1
	cases := []struct {
		name   string
		hex    string
		min    int  // bytes the decode must charge
		expand bool // allocates more than the input's length
		read   func(d *Decoder)
	}{
		{"String", "c8000000" + repeatHex("61", 200), 200, false, func(d *Decoder) { d.ReadString() }},
		{"ByteString", "c8000000" + repeatHex("61", 200), 200, false, func(d *Decoder) { d.ReadByteString() }},
		{"XmlElement", "c8000000" + repeatHex("61", 200), 200, false, func(d *Decoder) { d.ReadXmlElement() }},
		{"Opaque NodeId", "05 0000 c8000000" + repeatHex("61", 200), 200, false, func(d *Decoder) { d.ReadNodeID() }},
		{"ExtensionObject body", "0005 01 c8000000" + repeatHex("61", 200), 200, false, func(d *Decoder) { var eo ExtensionObject; d.ReadExtensionObject(&eo) }},
		{"Double[]", "8b 20000000" + repeatHex("00", 256), 256 + 24, true, func(d *Decoder) { var v Variant; d.ReadVariant(&v) }},
		{"Variant[]", "98 c8000000" + repeatHex("00", 200), 200 * 48, true, func(d *Decoder) { var v Variant; d.ReadVariant(&v) }},
		{"DataValue[]", "97 c8000000" + repeatHex("00", 200), 200 * 72, true, func(d *Decoder) { var v Variant; d.ReadVariant(&v) }},
		{"DiagnosticInfo[]", "99 c8000000" + repeatHex("00", 200), 200 * 56, true, func(d *Decoder) { var v Variant; d.ReadVariant(&v) }},
		{"ExtensionObject[]", "96 40000000" + repeatHex("000000", 64), 64 * 112, true, func(d *Decoder) { var v Variant; d.ReadVariant(&v) }},
		{"String[]", "8c 32000000" + repeatHex("ffffffff", 50), 50 * 16, true, func(d *Decoder) { var v Variant; d.ReadVariant(&v) }},
		{"Guid scalar", "0e" + repeatHex("01", 16), 16, false, func(d *Decoder) { var v Variant; d.ReadVariant(&v) }},
		{"DataValue scalar", "17 00", 72, true, func(d *Decoder) { var v Variant; d.ReadVariant(&v) }},
		{"matrix", "c6 01000000 07000000 01000000 01000000", 4 + 4 + 40, true, func(d *Decoder) { var v Variant; d.ReadVariant(&v) }},
		{"DiagnosticInfo inner", repeatHex("40", 10) + "00", 10 * 56, true, func(d *Decoder) { var di DiagnosticInfo; d.ReadDiagnosticInfo(&di) }},
		// A generated structure array: CallRequest.MethodsToCall of 60 empty calls.
		{"generated array", "0100 c802 " + emptyRequestHeaderHex + " 3c000000" + repeatHex("0000 0000 ffffffff", 60), 60 * 104, true,
			func(d *Decoder) { _, _ = d.ReadStructure(nil) }},
	}
	for _, c := range cases {
		b := unhexBytes(t, c.hex)
		d := NewDecoder(b, nil)
		c.read(d)
		if d.Err() != nil || d.MemoryCharged() < c.min {
			t.Errorf("%s: err %v, charged %d bytes, want at least %d", c.name, d.Err(), d.MemoryCharged(), c.min)
		}
		if !c.expand {
			continue
		}
		d.Reset(b, &tight)
		c.read(d)
		if !errors.Is(d.Err(), ErrMemoryBudgetExceeded) {
			t.Errorf("%s (%d bytes, budget %d): err = %v, want ErrMemoryBudgetExceeded", c.name, len(b), d.MemoryBudget(), d.Err())
		}
	}
}

// emptyRequestHeaderHex is a RequestHeader with every field null or zero.
const emptyRequestHeaderHex = "0000 0000000000000000 00000000 00000000 ffffffff 00000000 0000 00"

func repeatHex(h string, n int) string {
	b := make([]byte, 0, len(h)*n)
	for range n {
		b = append(b, h...)
	}
	return string(b)
}

// TestMemoryBudgetSteadyState: decoding into a reused response charges nothing for
// the capacity it reuses, so the steady-state charge does not grow with the message.
func TestMemoryBudgetSteadyState(t *testing.T) {
	buf := publishResponse1000(t)
	var r PublishResponse
	d := NewDecoder(buf, nil)
	for range 2 {
		d.Reset(buf, nil)
		if _, err := d.ReadStructure(&r); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	again := d.MemoryCharged()
	// The same notifications decoded into a fresh object are charged in full.
	e := NewEncoder(nil)
	publishResponseDCN(t).Encode(e)
	fresh := new(DataChangeNotification)
	d.Reset(e.Bytes(), nil)
	fresh.Decode(d)
	if d.Err() != nil {
		t.Fatal(d.Err())
	}
	t.Logf("1000 notifications: %d bytes charged into a fresh object, %d into a reused response", d.MemoryCharged(), again)
	if d.MemoryCharged() < 80_000 || again > 1024 {
		t.Errorf("charged %d bytes fresh, %d reused; want the 80 kB of notifications charged only when allocated", d.MemoryCharged(), again)
	}
}

// publishResponseDCN is the DataChangeNotification of publishResponse1000.
func publishResponseDCN(t *testing.T) *DataChangeNotification {
	var r PublishResponse
	if _, err := NewDecoder(publishResponse1000(t), nil).ReadStructure(&r); err != nil {
		t.Fatal(err)
	}
	return r.NotificationMessage.NotificationData[0].Value.(*DataChangeNotification)
}

// budgetSlack is what a failed decode may allocate beyond its charge: the error
// value and its message, which may quote a node id or a string from the input.
func budgetSlack(d *Decoder, n int) uint64 {
	if d.Err() == nil {
		return 0
	}
	return 4096 + 2*uint64(n)
}
