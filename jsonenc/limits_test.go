package jsonenc

import (
	"bytes"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/uagate/gateway/uastack/ua"
)

// TestDecoderLimitsAllocs: each limit of DecoderOptions is checked while the document
// is parsed: exceeding it gives the typed error, having allocated a small part of
// what the whole tree would take (about 70 bytes per value).
func TestDecoderLimitsAllocs(t *testing.T) {
	repeat := func(prefix, elem, sep, suffix string, n int) []byte {
		var b bytes.Buffer
		b.WriteString(prefix)
		for i := range n {
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(elem)
		}
		b.WriteString(suffix)
		return b.Bytes()
	}
	// 500 arrays of 1000 zeros: each array is within MaxArrayLength, the
	// values within DefaultMaxValues.
	var nested bytes.Buffer
	nested.WriteByte('[')
	for i := range 500 {
		if i > 0 {
			nested.WriteByte(',')
		}
		nested.Write(repeat("[", "0", ",", "]", 1000))
	}
	nested.WriteByte(']')
	cases := []struct {
		name  string
		opts  DecoderOptions
		in    []byte
		want  error
		alloc uint64 // at most this many bytes allocated
	}{
		{"depth", DecoderOptions{MaxDepth: 50}, repeat("", "[", "", "", 100_000), ErrTooDeep, 64 << 10},
		{"array", DecoderOptions{MaxArrayLength: 1000}, repeat("[", "0", ",", "]", 500_000), ErrLimitExceeded, 256 << 10},
		{"object", DecoderOptions{MaxArrayLength: 1000}, distinctMembers(200_000), ErrLimitExceeded, 512 << 10},
		{"large object", DecoderOptions{}, distinctMembers(100_000), nil, 0},
		{"duplicate in a large object", DecoderOptions{}, dupMembers(), ErrSyntax, 1 << 20},
		{"string", DecoderOptions{MaxStringLength: 1 << 10}, []byte(`"` + strings.Repeat("x", 4<<20) + `"`), ErrLimitExceeded, 64 << 10},
		{"escaped string", DecoderOptions{MaxStringLength: 1 << 10}, []byte(`"` + strings.Repeat(`\n`, 2<<20) + `"`), ErrLimitExceeded, 64 << 10},
		{"invalid UTF-8 string", DecoderOptions{MaxStringLength: 1 << 10}, []byte(`"` + strings.Repeat("\xff", 1<<20) + `"`), ErrLimitExceeded, 64 << 10},
		{"member name", DecoderOptions{MaxStringLength: 1 << 10}, []byte(`{"` + strings.Repeat("k", 2<<20) + `":1}`), ErrLimitExceeded, 64 << 10},
		{"values", DecoderOptions{MaxValues: 10_000}, nested.Bytes(), ErrLimitExceeded, 2 << 20},
		{"input size", DecoderOptions{MaxInputSize: 1 << 20}, repeat("[", "0", ",", "]", 1<<20), ErrLimitExceeded, 4 << 10},
		{"within every limit", DecoderOptions{}, nested.Bytes(), nil, 0},
		{"values by default", DecoderOptions{}, repeat("[", "0", ",", "]", DefaultMaxValues), ErrLimitExceeded, 5 * 72 * DefaultMaxValues},
	}
	var ms0, ms1 runtime.MemStats
	for _, c := range cases {
		d := NewDecoder(c.opts)
		runtime.ReadMemStats(&ms0)
		_, err := d.parse(c.in)
		runtime.ReadMemStats(&ms1)
		got := ms1.TotalAlloc - ms0.TotalAlloc
		t.Logf("%s: %d-byte input, %d bytes allocated: %v", c.name, len(c.in), got, err)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		if c.want == ErrLimitExceeded && !errors.Is(err, ua.StatusBadEncodingLimitsExceeded) {
			t.Errorf("%s: %v does not wrap StatusBadEncodingLimitsExceeded", c.name, err)
		}
		if !raceEnabled && got > c.alloc {
			t.Errorf("%s: allocated %d bytes before failing, want at most %d", c.name, got, c.alloc)
		}
	}
	// The public entry points report the same errors.
	d := NewDecoder(DecoderOptions{MaxArrayLength: 10})
	if _, err := d.DecodeVariant([]byte(`{"UaType":6,"Value":[1,2,3,4,5,6,7,8,9,10,11]}`)); !errors.Is(err, ErrLimitExceeded) {
		t.Errorf("DecodeVariant: %v", err)
	}
	if _, err := d.DecodeNetworkMessage(repeat(`{"MessageType":"ua-data","Messages":[`, `{"Payload":{}}`, ",", "]}", 11), nil); !errors.Is(err, ErrLimitExceeded) {
		t.Errorf("DecodeNetworkMessage: %v", err)
	}
}

// distinctMembers is an object of n members "k0" ... "k<n-1>".
func distinctMembers(n int) []byte {
	b := []byte{'{'}
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `"k`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `":0`...)
	}
	return append(b, '}')
}

// dupMembers is an object of 100 members, then "k77" again: found by the set a
// large object uses.
func dupMembers() []byte {
	b := distinctMembers(100)
	return append(b[:len(b)-1], `,"k77":1}`...)
}
