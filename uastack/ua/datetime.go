package ua

import (
	"math"
	"time"
)

// DateTime is an OPC UA DateTime: 100-nanosecond ticks since 1601-01-01 00:00 UTC.
// 0 is the null (minimum) value and math.MaxInt64 the maximum; conversions clamp
// to that range as Part 6 §5.2.2.5 requires.
type DateTime int64

// ticksTo1970 is the number of 100 ns ticks between 1601-01-01 and 1970-01-01.
const ticksTo1970 = 116444736000000000

// MaxDateTime is the largest DateTime ("end of time").
const MaxDateTime = DateTime(math.MaxInt64)

// maxTimeTicks is 9999-12-31T23:59:59Z, the .NET and Part 6 §5.2.2.5 maximum: a
// DateTime from there on means MaxDateTime ("end of time"), as the JSON encoding
// has it too.
const maxTimeTicks = (253402300799 + 11644473600) * 10_000_000

// NewDateTime converts t to a DateTime. The zero time and times before 1601 give 0;
// times from 9999-12-31T23:59:59Z on give MaxDateTime.
func NewDateTime(t time.Time) DateTime {
	if t.IsZero() {
		return 0
	}
	s := t.Unix()
	// Seconds bounds: 1601-01-01 is -11644473600; 9999-12-31T23:59:59 is 253402300799.
	if s < -11644473600 {
		return 0
	}
	if s >= 253402300799 {
		return MaxDateTime
	}
	return DateTime((s+11644473600)*10_000_000 + int64(t.Nanosecond()/100))
}

// Now returns the current time as a DateTime.
func Now() DateTime { return NewDateTime(time.Now()) }

// Time converts d to a UTC time.Time. The null value 0 gives the zero time.Time;
// MaxDateTime and anything from 9999-12-31T23:59:59Z on give that time, so the year
// never passes 9999.
func (d DateTime) Time() time.Time {
	if d <= 0 {
		return time.Time{}
	}
	if d >= maxTimeTicks {
		return time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	}
	t := int64(d) - ticksTo1970
	sec := t / 10_000_000
	ns := (t % 10_000_000) * 100
	if ns < 0 {
		sec--
		ns += 1_000_000_000
	}
	return time.Unix(sec, ns).UTC()
}

// IsNull reports whether d is the null DateTime.
func (d DateTime) IsNull() bool { return d <= 0 }

// String formats d as RFC 3339 with up to 7 fraction digits.
func (d DateTime) String() string {
	if d <= 0 {
		return "0001-01-01T00:00:00Z"
	}
	return d.Time().Format("2006-01-02T15:04:05.9999999Z")
}
