package jsonenc

import (
	"github.com/uagate/gateway/uastack/ua"
)

const (
	ticksPerSecond = 10_000_000
	ticksPerDay    = 86_400 * ticksPerSecond
	// days from 1601-01-01 to 1970-01-01
	daysTo1970 = 134_774
)

// maxTicks is 9999-12-31T23:59:59Z: from there on a DateTime is written as the
// maximum (Part 6 §5.4.2.6), and decoded as ua.MaxDateTime.
var maxTicks = (daysFromCivil(9999, 12, 31)+daysTo1970)*ticksPerDay + 86_399*ticksPerSecond

// Min and max DateTime JSON strings (Part 6 §5.4.2.6).
const (
	minDateTimeText = "0001-01-01T00:00:00Z"
	maxDateTimeText = "9999-12-31T23:59:59Z"
)

// appendDateTime appends d as an ISO 8601 UTC string in quotes, with 0–7
// fraction digits (trailing zeros trimmed). The null value (and anything
// before 1601) gives "0001-01-01T00:00:00Z"; ua.MaxDateTime and anything from
// 9999-12-31T23:59:59 on give "9999-12-31T23:59:59Z". It writes the digits
// itself (no time.Format, no allocation); dc caches the date part, since the
// timestamps of one message are mostly of one day.
func appendDateTime(b []byte, d ua.DateTime, dc *dateCache) []byte {
	if dc == nil {
		return formatDateTime(b, d, &dateCache{})
	}
	for i := range dc.recent {
		if r := &dc.recent[i]; r.n != 0 && r.d == d {
			return append(b, r.text[:r.n]...)
		}
	}
	start := len(b)
	b = formatDateTime(b, d, dc)
	if n := len(b) - start; n <= len(dc.recent[0].text) {
		r := &dc.recent[dc.next]
		dc.next ^= 1
		r.d, r.n = d, uint8(copy(r.text[:], b[start:]))
	}
	return b
}

// formatDateTime is appendDateTime without the memory of recent values.
func formatDateTime(b []byte, d ua.DateTime, dc *dateCache) []byte {
	if d <= 0 {
		return append(b, `"`+minDateTimeText+`"`...)
	}
	if int64(d) >= maxTicks {
		return append(b, `"`+maxDateTimeText+`"`...)
	}
	t := int64(d)
	sec := t / ticksPerSecond
	frac := t - sec*ticksPerSecond
	if dc == nil {
		dc = &dateCache{}
	}
	if !dc.valid || dc.sec != sec {
		days := sec / 86400
		if !dc.valid || dc.day != days {
			y, m, dd := civilFromDays(days - daysTo1970)
			dc.text[0], dc.text[1], dc.text[2] = '"', '0'+byte(y/1000), '0'+byte(y/100%10)
			dc.text[3], dc.text[4], dc.text[5] = digits2[2*(y%100)], digits2[2*(y%100)+1], '-'
			dc.text[6], dc.text[7], dc.text[8] = digits2[2*m], digits2[2*m+1], '-'
			dc.text[9], dc.text[10], dc.text[11] = digits2[2*dd], digits2[2*dd+1], 'T'
			dc.day = days
		}
		secs := sec - days*86400
		hh, mi, ss := secs/3600, secs/60%60, secs%60
		dc.text[12], dc.text[13], dc.text[14] = digits2[2*hh], digits2[2*hh+1], ':'
		dc.text[15], dc.text[16], dc.text[17] = digits2[2*mi], digits2[2*mi+1], ':'
		dc.text[18], dc.text[19] = digits2[2*ss], digits2[2*ss+1]
		dc.sec, dc.valid = sec, true
	}
	b = append(b, dc.text[:]...)
	if frac != 0 {
		// 7 digits: f1 (1 digit) + three pairs, trailing zeros trimmed.
		var dg [7]byte
		p3 := frac % 100
		frac /= 100
		p2 := frac % 100
		frac /= 100
		p1 := frac % 100
		f0 := frac / 100
		dg = [7]byte{'0' + byte(f0), digits2[2*p1], digits2[2*p1+1], digits2[2*p2], digits2[2*p2+1], digits2[2*p3], digits2[2*p3+1]}
		n := 7
		for dg[n-1] == '0' {
			n--
		}
		b = append(b, '.')
		b = append(b, dg[:n]...)
	}
	return append(b, 'Z', '"')
}

// dateCache holds the formatted date of the last day written, and the
// last two values written whole: the fields of one tick share their
// timestamps, and a DataValue's source and server timestamps alternate.
type dateCache struct {
	day, sec int64
	valid    bool
	text     [20]byte // `"YYYY-MM-DDThh:mm:ss`
	recent   [2]dateText
	next     uint8 // the entry of recent to replace
}

// dateText is a DateTime and its JSON text, quotes included.
type dateText struct {
	d    ua.DateTime
	n    uint8 // 0: empty
	text [30]byte
}

const digits2 = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// civilFromDays converts days since 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's algorithm).
func civilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	if mp < 10 {
		m = mp + 3
	} else {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return
}

// daysFromCivil is the inverse of civilFromDays.
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// WriteDateTime writes d as an ISO 8601 UTC JSON string (see appendDateTime
// for the range limits). As an array element, the null DateTime is written as
// the minimum string, which decoders map back to null.
func (e *Encoder) WriteDateTime(d ua.DateTime) {
	e.comma()
	e.b = appendDateTime(e.b, d, &e.dates)
	e.done()
}

// parseDateTime parses an ISO 8601 / RFC 3339 date-time (any number of
// fraction digits, truncated to 100 ns; Z or ±hh:mm offset) into a DateTime,
// mapping the JSON minimum and maximum back to the null DateTime and
// ua.MaxDateTime.
func parseDateTime(s string) (ua.DateTime, bool) {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	num := func(p string) (int64, bool) {
		var v int64
		for i := 0; i < len(p); i++ {
			c := p[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int64(c-'0')
		}
		return v, true
	}
	y, ok1 := num(s[0:4])
	mo, ok2 := num(s[5:7])
	d, ok3 := num(s[8:10])
	h, ok4 := num(s[11:13])
	mi, ok5 := num(s[14:16])
	se, ok6 := num(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) || h > 23 || mi > 59 || se > 60 {
		return 0, false
	}
	if se == 60 { // leap second: clamp
		se = 59
	}
	rest := s[19:]
	var frac int64
	if len(rest) > 0 && rest[0] == '.' {
		i := 1
		scale := int64(ticksPerSecond / 10)
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			frac += int64(rest[i]-'0') * scale
			scale /= 10
			i++
		}
		if i == 1 {
			return 0, false
		}
		rest = rest[i:]
	}
	var off int64
	switch {
	case rest == "Z" || rest == "z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := num(rest[1:3])
		om, ok2 := num(rest[4:6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, false
		}
		off = (oh*3600 + om*60) * ticksPerSecond
		if rest[0] == '-' {
			off = -off
		}
	default:
		return 0, false
	}
	if y < 1601 {
		return 0, true
	}
	if y == 9999 && mo == 12 && d == 31 && h == 23 && mi == 59 && se == 59 {
		return ua.MaxDateTime, true
	}
	days := daysFromCivil(y, mo, d) + daysTo1970
	t := days*ticksPerDay + ((h*60+mi)*60+se)*ticksPerSecond + frac - off
	if t <= 0 {
		return 0, true
	}
	return ua.DateTime(t), true
}

func daysIn(y, m int64) int64 {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
