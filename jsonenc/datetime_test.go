package jsonenc

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/uagate/gateway/uastack/ua"
)

func TestDateTimeFormat(t *testing.T) {
	cases := []struct {
		d    ua.DateTime
		want string
	}{
		{0, `"0001-01-01T00:00:00Z"`},
		{-5, `"0001-01-01T00:00:00Z"`},
		{1, `"1601-01-01T00:00:00.0000001Z"`},
		{ua.MaxDateTime, `"9999-12-31T23:59:59Z"`},
		{ua.NewDateTime(time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC)), `"9999-12-31T23:59:59Z"`},
		{ua.NewDateTime(time.Date(9999, 12, 31, 23, 59, 58, 500000000, time.UTC)), `"9999-12-31T23:59:58.5Z"`},
		{ua.NewDateTime(time.Date(2021, 9, 14, 7, 14, 30, 0, time.UTC)), `"2021-09-14T07:14:30Z"`},
		{ua.NewDateTime(time.Date(2021, 9, 14, 7, 14, 30, 500000000, time.UTC)), `"2021-09-14T07:14:30.5Z"`},
		{ua.NewDateTime(time.Date(2024, 2, 29, 23, 59, 59, 123456700, time.UTC)), `"2024-02-29T23:59:59.1234567Z"`},
		{ua.NewDateTime(time.Date(1970, 1, 1, 0, 0, 0, 100, time.UTC)), `"1970-01-01T00:00:00.0000001Z"`},
	}
	var dc dateCache
	for _, c := range cases {
		if got := string(appendDateTime(nil, c.d, &dc)); got != c.want {
			t.Errorf("%d: got %s want %s", c.d, got, c.want)
		}
		if got := string(appendDateTime(nil, c.d, nil)); got != c.want {
			t.Errorf("%d (no cache): got %s want %s", c.d, got, c.want)
		}
	}
}

// TestDateTimeAgainstTime compares with time.Format and the parser over
// random instants, through the cache.
func TestDateTimeAgainstTime(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var dc dateCache
	for i := 0; i < 200000; i++ {
		d := ua.DateTime(r.Int64N(maxTicks-1) + 1)
		switch {
		case i%3 == 0: // runs of nearby values exercise the cache
			d = ua.DateTime(int64(d)/ticksPerDay*ticksPerDay + r.Int64N(ticksPerDay))
		case i%5 == 1 && i > 5: // values written just before: the recent ones
			d = ua.DateTime(r.Int64N(maxTicks-1) + 1)
			if i%2 == 0 {
				d = dc.recent[r.IntN(2)].d
			}
		}
		if d <= 0 {
			d = 1
		}
		got := string(appendDateTime(nil, d, &dc))
		want := `"` + d.Time().Format("2006-01-02T15:04:05.9999999Z") + `"`
		if got != want {
			t.Fatalf("%d: got %s want %s", d, got, want)
		}
		back, ok := parseDateTime(got[1 : len(got)-1])
		if !ok || back != d {
			t.Fatalf("parse %s: got %d ok=%v want %d", got, back, ok, d)
		}
	}
}

func TestParseDateTime(t *testing.T) {
	for s, want := range map[string]ua.DateTime{
		"0001-01-01T00:00:00Z":           0,
		"1600-12-31T23:59:59Z":           0,
		"9999-12-31T23:59:59Z":           ua.MaxDateTime,
		"9999-12-31T23:59:59.9999999Z":   ua.MaxDateTime,
		"2021-09-14T07:14:30.123456789Z": ua.NewDateTime(time.Date(2021, 9, 14, 7, 14, 30, 123456700, time.UTC)),
		"2021-09-14T09:14:30+02:00":      ua.NewDateTime(time.Date(2021, 9, 14, 7, 14, 30, 0, time.UTC)),
	} {
		got, ok := parseDateTime(s)
		if !ok || got != want {
			t.Errorf("%s: got %d ok=%v want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "2021-13-01T00:00:00Z", "2021-02-30T00:00:00Z", "2021-09-14T07:14:30", "2021-09-14T07:14:30.Z", "abcd-ef-ghTij:kl:mnZ"} {
		if _, ok := parseDateTime(s); ok {
			t.Errorf("%q: parsed", s)
		}
	}
}

// BenchmarkAppendDateTime: a DataValue's two timestamps, shared by the
// fields of one tick (what the bridge writes), through the memory of recent
// values and without it.
func BenchmarkAppendDateTime(b *testing.B) {
	src, srv := ua.DateTime(133_000_000_001_234_567), ua.DateTime(133_000_000_001_334_568)
	buf := make([]byte, 0, 64)
	b.Run("recent", func(b *testing.B) {
		var dc dateCache
		for b.Loop() {
			buf = appendDateTime(buf[:0], src, &dc)
			buf = appendDateTime(buf, srv, &dc)
		}
	})
	b.Run("format", func(b *testing.B) {
		var dc dateCache
		for b.Loop() {
			buf = formatDateTime(buf[:0], src, &dc)
			buf = formatDateTime(buf, srv, &dc)
		}
	})
}
