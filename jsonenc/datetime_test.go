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
		if i%3 == 0 { // runs of nearby values exercise the cache
			d = ua.DateTime(int64(d)/ticksPerDay*ticksPerDay + r.Int64N(ticksPerDay))
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
