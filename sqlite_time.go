package dedupe

import (
	"database/sql"
	"time"
)

// The NekoBot timestamp codec: the marks table holds naive ISO-8601 text,
// as NekoBot (Python) writes it, in the store's Location.

// sqliteLive reports whether a mark with expiry exp is present at now: NULL or
// unreadable text is present forever, as NekoBot reads it.
func sqliteLive(exp sql.NullString, now time.Time, loc *time.Location) bool {
	if !exp.Valid {
		return true
	}
	t, ok := parseSQLiteTime(exp.String, loc)
	return !ok || now.Before(t)
}

// formatSQLiteTime formats t as NekoBot writes timestamps, Python's
// datetime.isoformat of a naive local time: "2006-01-02T15:04:05.000000" in
// loc, without the fraction when the microseconds are zero.
func formatSQLiteTime(t time.Time, loc *time.Location) string {
	t = t.In(loc)
	var b [26]byte
	y, mo, d := t.Date()
	h, mi, sec := t.Clock()
	put := func(i, v, n int) {
		for j := i + n - 1; j >= i; j-- {
			b[j] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, y, 4)
	b[4] = '-'
	put(5, int(mo), 2)
	b[7] = '-'
	put(8, d, 2)
	b[10] = 'T'
	put(11, h, 2)
	b[13] = ':'
	put(14, mi, 2)
	b[16] = ':'
	put(17, sec, 2)
	us := t.Nanosecond() / 1000
	if us == 0 {
		return string(b[:19])
	}
	b[19] = '.'
	put(20, us, 6)
	return string(b[:])
}

// parseSQLiteTime parses a stored timestamp: "YYYY-MM-DDTHH:MM:SS" (or with a
// space for the 'T'), an optional fraction of 1 to 9 digits, and an optional
// zone, "Z" or "±HH:MM". Without a zone the time is in loc.
func parseSQLiteTime(s string, loc *time.Location) (time.Time, bool) {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != ' ') || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	num := func(i, n int) int {
		v := 0
		for j := i; j < i+n; j++ {
			c := s[j]
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	y, mo, d, h, mi, sec := num(0, 4), num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2)
	if y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	rest := s[19:]
	ns := 0
	if len(rest) > 0 && rest[0] == '.' {
		i := 1
		for ; i < len(rest) && '0' <= rest[i] && rest[i] <= '9'; i++ {
			if i <= 9 {
				ns = ns*10 + int(rest[i]-'0')
			}
		}
		if i == 1 || i > 10 {
			return time.Time{}, false
		}
		for k := i; k <= 9; k++ {
			ns *= 10
		}
		rest = rest[i:]
	}
	zone, offset := loc, 0
	switch {
	case rest == "":
	case rest == "Z":
		zone = time.UTC
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, om := num(len(s)-5, 2), num(len(s)-2, 2)
		if oh < 0 || oh > 23 || om < 0 || om > 59 {
			return time.Time{}, false
		}
		offset = (oh*60 + om) * 60
		if rest[0] == '-' {
			offset = -offset
		}
		zone = time.UTC
	default:
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, ns, zone)
	if t.Day() != d { // February 30th and the like
		return time.Time{}, false
	}
	return t.Add(-time.Duration(offset) * time.Second), true
}

// sqliteOwnFormat matches the timestamps the store writes, naive ISO-8601 with
// no fraction or six digits of it. For them text order is time order, so SQL
// compares them exactly with the formatted current time.
const sqliteOwnFormat = "(expires_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]'" +
	" OR expires_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]')"
