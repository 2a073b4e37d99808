package dedupe

import (
	"context"
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

// sqliteFutureSkew is how far in the future the newest created_at of the
// marks table may lie before the store warns of a wrong Location.
const sqliteFutureSkew = 5 * time.Minute

// sqliteRecentRows is how many of the rows inserted last warnFutureMarks
// reads: the newest marks, found without reading the whole table.
const sqliteRecentRows = 100

// warnFutureMarks logs a warning when the marks inserted last were created
// more than [sqliteFutureSkew] after the store's now. Their timestamps are
// naive, read in [SQLiteConfig].Location: a file that NekoBot wrote in a zone
// 8 h east of Location reads 8 h ahead, its expired marks as live and every
// expiry 8 h late. A failed read warns of nothing.
func (s *SQLiteStore) warnFutureMarks(ctx context.Context) {
	var newest time.Time
	var text string
	_ = s.retryBusy(ctx, nil, func() error {
		rows, err := s.db.QueryContext(ctx, "SELECT created_at FROM "+s.marks+" ORDER BY rowid DESC LIMIT ?", sqliteRecentRows)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c sql.NullString
			if rows.Scan(&c) != nil || !c.Valid {
				continue
			}
			if t, ok := parseSQLiteTime(c.String, s.loc); ok && t.After(newest) {
				newest, text = t, c.String
			}
		}
		return rows.Err()
	})
	ahead := newest.Sub(s.now())
	if newest.IsZero() || ahead <= sqliteFutureSkew {
		return
	}
	s.log.Warn("dedupe: sqlite: marks created in the future: their naive times are read in the wrong zone; "+
		"set SQLiteConfig.Location (the dedupe command's ?tz=) to the zone of the process that wrote them",
		"table", s.table, "newest_created_at", text, "ahead", ahead.Round(time.Minute).String(), "location", s.loc.String())
}
