package dedupe_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// nekobotFixture copies NekoBot's database into a temporary directory, or skips
// the test when the shared test data is absent.
func nekobotFixture(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "shared", "testdata", "nekobot", "gateway.db")
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("NekoBot fixture %s is absent (the shared test data sits beside the repository); skipping", src)
	}
	require.NoError(t, err)
	defer in.Close()
	dst := filepath.Join(t.TempDir(), "gateway.db")
	out, err := os.Create(dst)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return dst
}

// nekobotExists reads key as NekoBot's SQLiteDedupeStore does: the row's
// expires_at parsed as a naive datetime (datetime.fromisoformat), present while
// now <= expires_at, and present forever when NULL or unparsable. now is
// NekoBot's naive local time (datetime.now()).
func nekobotExists(t *testing.T, db *sql.DB, key string, now time.Time) bool {
	t.Helper()
	var exp sql.NullString
	err := db.QueryRow("SELECT expires_at FROM gateway_dedupe WHERE dedupe_key = ?", key).Scan(&exp)
	if errors.Is(err, sql.ErrNoRows) {
		return false
	}
	require.NoError(t, err)
	if !exp.Valid {
		return true
	}
	naive := now.Format("2006-01-02T15:04:05.999999")
	nowNaive, err := time.Parse("2006-01-02T15:04:05.999999", naive)
	require.NoError(t, err)
	for _, layout := range []string{"2006-01-02T15:04:05.000000", "2006-01-02T15:04:05"} {
		if e, err := time.Parse(layout, exp.String); err == nil {
			return !nowNaive.After(e)
		}
	}
	return true
}

func TestSQLiteNekoBotFixture(t *testing.T) {
	path := nekobotFixture(t)
	others := dumpTables(t, path, "gateway_dedupe", "gateway_dedupe_claims", "gateway_dedupe_results")
	dedupeSchema := schemaOf(t, path, "gateway_dedupe")

	clock := dedupetest.NewClock(sqliteT0)
	s := openSQLite(t, path, dedupe.SQLiteConfig{Location: time.UTC, Now: clock.Now})
	db := rawDB(t, path)
	ctx := context.Background()
	storeReadsNekoBotMarks(t, s, db, clock)

	// Claim sees NekoBot's marks; an expired one can be claimed.
	c, cSt, err := claimNew(ctx, s, dedupe.Key{Channel: "telegram", MessageID: "5"}, 0)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Duplicate, cSt)
	c, cSt, err = claimNew(ctx, s, dedupe.Key{Channel: "qq", MessageID: "1002"}, 0)
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, cSt)
	assert.False(t, nekobotExists(t, db, "qq:1002", clock.Now()), "a claim is no mark to NekoBot")

	nekobotReadsStoreMarks(t, s, db, clock, c.Key)

	// Only x:1 has expired now; qq:1002 was marked again.
	n, err := s.CleanupExpired(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	assert.Equal(t, []string{"discord:123456789012345678", "qq:1001", "qq:1002", "telegram:5", "telegram:6", "web:a:b:c", "web:x:y"}, markKeys(t, db))

	pythonReadsMarks(t, path, map[string]bool{"qq:1001": true, "qq:1002": true, "telegram:5": true, "telegram:6": true, "web:x:y": true, "web:a:b:c": true})

	// NekoBot's own cleanup, a text comparison, agrees with the store's marks.
	nekobotCleanup := func(now string) int64 {
		res, err := db.Exec("DELETE FROM gateway_dedupe WHERE expires_at < ?", now)
		require.NoError(t, err)
		n, err := res.RowsAffected()
		require.NoError(t, err)
		return n
	}
	assert.Zero(t, nekobotCleanup("2026-11-29T20:31:00.250001"), "every mark left is live to NekoBot")
	assert.EqualValues(t, 1, nekobotCleanup("2026-11-29T20:31:00.250002"), "web:x:y expires when the store says")

	require.NoError(t, s.Close())
	require.NoError(t, db.Close())
	assert.Equal(t, others, dumpTables(t, path, "gateway_dedupe", "gateway_dedupe_claims", "gateway_dedupe_results"), "NekoBot's other tables")
	assert.Equal(t, dedupeSchema, schemaOf(t, path, "gateway_dedupe"), "NekoBot's table and index")
}

// markKeys returns the keys of the marks table, in order.
func markKeys(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query("SELECT dedupe_key FROM gateway_dedupe ORDER BY dedupe_key")
	require.NoError(t, err)
	var keys []string
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		keys = append(keys, k)
	}
	require.NoError(t, rows.Err())
	return keys
}

// storeReadsNekoBotMarks checks that the store and NekoBot agree on every
// mark of the fixture, at the clock's time.
func storeReadsNekoBotMarks(t *testing.T, s *dedupe.SQLiteStore, db *sql.DB, clock *dedupetest.Clock) {
	t.Helper()
	live := map[string]bool{"qq:1001": true, "telegram:5": true, "web:a:b:c": true, "discord:123456789012345678": true}
	all := markKeys(t, db)
	require.Len(t, all, 6, "fixture rows")
	got := map[string]bool{}
	for _, text := range all {
		k, err := dedupe.ParseKey(text)
		require.NoError(t, err, text)
		ok, err := s.Exists(context.Background(), k)
		require.NoError(t, err)
		if ok {
			got[text] = true
		}
		assert.Equal(t, ok, nekobotExists(t, db, text, clock.Now()), "store and NekoBot agree on %s", text)
	}
	assert.Equal(t, live, got, "live keys at %v", clock.Now())
}

// nekobotReadsStoreMarks marks telegram:6, claimed (qq:1002, which it holds)
// and web:x:y, and checks that NekoBot reads the marks as the store does, with
// and without microseconds. It leaves the clock at sqliteT0.
func nekobotReadsStoreMarks(t *testing.T, s *dedupe.SQLiteStore, db *sql.DB, clock *dedupetest.Clock, claimed dedupe.Key) {
	t.Helper()
	ctx := context.Background()
	k1 := dedupe.Key{Channel: "telegram", MessageID: "6"}
	require.NoError(t, s.Mark(ctx, k1, time.Hour))
	clock.Advance(250001 * time.Microsecond)
	require.NoError(t, s.Mark(ctx, claimed, 2*time.Hour)) // qq:1002 again, and drops the claim
	k3 := dedupe.Key{Channel: "web", MessageID: "x:y"}
	require.NoError(t, s.Mark(ctx, k3, time.Minute))
	type row struct{ channel, id, created, expires string }
	read := func(key string) row {
		var r row
		require.NoError(t, db.QueryRow("SELECT channel_id, message_id, created_at, expires_at FROM gateway_dedupe WHERE dedupe_key = ?", key).
			Scan(&r.channel, &r.id, &r.created, &r.expires))
		return r
	}
	assert.Equal(t, row{"telegram", "6", "2026-11-29T20:30:00", "2026-11-29T21:30:00"}, read("telegram:6"))
	// NekoBot's upsert keeps created_at and updates expires_at.
	assert.Equal(t, row{"qq", "1002", "2026-11-29T20:28:32.893487", "2026-11-29T22:30:00.250001"}, read("qq:1002"))
	assert.Equal(t, row{"web", "x:y", "2026-11-29T20:30:00.250001", "2026-11-29T20:31:00.250001"}, read("web:x:y"))
	for _, at := range []time.Time{clock.Now(), sqliteT0.Add(time.Minute), sqliteT0.Add(59 * time.Minute), sqliteT0.Add(61 * time.Minute)} {
		for _, k := range []dedupe.Key{k1, claimed, k3} {
			clock.Set(at)
			ok, err := s.Exists(ctx, k)
			require.NoError(t, err)
			assert.Equal(t, nekobotExists(t, db, k.String(), at), ok, "%s at %v", k, at)
		}
	}
	clock.Set(sqliteT0)
	var claims int
	require.NoError(t, db.QueryRow("SELECT count(*) FROM gateway_dedupe_claims").Scan(&claims))
	assert.Zero(t, claims, "Mark dropped the claim")
}

// pythonReadsMarks runs NekoBot's read rule in Python's own sqlite3 and
// datetime, when python3 is installed, on the file the store has open, at
// 2026-11-29T20:30:00 naive.
func pythonReadsMarks(t *testing.T, path string, want map[string]bool) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Log("python3 not found: skipping the check with Python's datetime")
		return
	}
	const script = `
import sqlite3, sys
from datetime import datetime
now = datetime.fromisoformat("2026-11-29T20:30:00")
db = sqlite3.connect(sys.argv[1], timeout=5)
for key in sys.argv[2:]:
    row = db.execute("SELECT expires_at FROM gateway_dedupe WHERE dedupe_key = ?", (key,)).fetchone()
    if row is None:
        print(key, False); continue
    try:
        print(key, row[0] is None or now <= datetime.fromisoformat(row[0]))
    except ValueError:
        print(key, True)
`
	keys := []string{"qq:1001", "qq:1002", "telegram:5", "telegram:6", "web:x:y", "web:a:b:c", "x:1", "nope:1"}
	out, err := exec.Command(py, append([]string{"-c", script, path}, keys...)...).CombinedOutput()
	if err != nil {
		t.Logf("python3 could not run the check (%v): %s", err, out)
		return
	}
	t.Logf("python3 read %d keys", len(keys))
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, " ")
		if v == "True" {
			got[k] = true
		}
	}
	assert.Equal(t, want, got, "Python NekoBot's view of the marks")
}

func TestSQLiteTimestampFormats(t *testing.T) {
	// The store's zone is UTC+2, so a naive "22:30" is the test clock's 20:30Z.
	loc := time.FixedZone("UTC+2", 2*60*60)
	path := filepath.Join(t.TempDir(), "d.db")
	s := openSQLite(t, path, dedupe.SQLiteConfig{Location: loc, Now: dedupetest.NewClock(sqliteT0).Now})
	db := rawDB(t, path)
	for i, tc := range []struct {
		expires any
		want    bool
	}{
		{"2026-11-29T22:30:00.000001", true},
		{"2026-11-29T22:30:00.000000", false}, // expires at the clock: gone
		{"2026-11-29T22:29:59.999999", false},
		{"2026-11-29T22:30:01", true},
		{"2026-11-29T22:29:59", false},
		{"2026-11-29 22:30:01", true},
		{"2026-11-29T22:30:00.5", true},
		{"2026-11-29T22:30:00.123456789", true},
		{"2026-11-29T20:30:01Z", true},
		{"2026-11-29T20:29:59.9Z", false},
		{"2026-11-29T21:30:01+01:00", true},
		{"2026-11-29T21:29:59+01:00", false},
		{"2026-11-29T15:30:01-05:00", true},
		{"2026-11-29T15:29:59-05:00", false},
		{nil, true},                    // NULL: present forever
		{"", true},                     // unparsable: present forever
		{"never", true},                // unparsable
		{"2026-02-30T00:00:00", true},  // no such day: unparsable
		{"2026-11-29T24:00:00", true},  // no such hour
		{"2026-11-29T22:30:00.", true}, // empty fraction
		{"2026-11-29T22:30:00+2", true},
		{"1999-01-01T00:00:00", false},
	} {
		k := dedupe.Key{Channel: "fmt", MessageID: fmt.Sprint(i)}
		_, err := db.Exec("INSERT INTO gateway_dedupe VALUES (?, 'fmt', 'x', '2026-11-29T20:00:00', ?)", k.String(), tc.expires)
		require.NoError(t, err)
		ok, err := s.Exists(context.Background(), k)
		require.NoError(t, err)
		assert.Equal(t, tc.want, ok, "expires_at %v", tc.expires)
		_, cSt, err := claimNew(context.Background(), s, k, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, tc.want, cSt == dedupe.Duplicate, "Claim with expires_at %v: %v", tc.expires, cSt)
	}
}

func TestSQLiteWritesLocalTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	loc := time.FixedZone("UTC-3:30", -(3*60+30)*60)
	now := time.Date(2026, 12, 31, 23, 0, 0, 999, time.UTC) // sub-microsecond part is dropped
	s := openSQLite(t, path, dedupe.SQLiteConfig{Location: loc, Now: dedupetest.NewClock(now).Now})
	k := dedupe.Key{Channel: "qq", MessageID: "a:b"}
	require.NoError(t, s.Mark(context.Background(), k, 90*time.Minute+time.Microsecond))
	var channel, id, created, expires string
	require.NoError(t, rawDB(t, path).QueryRow("SELECT channel_id, message_id, created_at, expires_at FROM gateway_dedupe WHERE dedupe_key = 'qq:a:b'").
		Scan(&channel, &id, &created, &expires))
	assert.Equal(t, []string{"qq", "a:b", "2026-12-31T19:30:00", "2026-12-31T21:00:00.000001"}, []string{channel, id, created, expires})
}

// FuzzSQLiteExpiresAt stores arbitrary text as a mark's expiry and checks that
// Exists agrees with a reference reading built on package time: NULL-like and
// unreadable text is present forever, readable text until its time.
func FuzzSQLiteExpiresAt(f *testing.F) {
	for _, s := range []string{
		"2026-11-29T20:30:00.000001", "2026-11-29T20:30:00", "2026-11-29 20:29:59", "2026-11-29T20:30:00Z",
		"2026-11-29T21:30:00+01:00", "2026-11-29T19:30:00-01:00", "2026-11-29T20:30:00.1234567891",
		"2026-02-29T00:00:00", "9999-12-31T23:59:59.999999", "0000-01-01T00:00:00", "", "x", "2026-11-29T20:30:00+01",
	} {
		f.Add(s)
	}
	path := filepath.Join(f.TempDir(), "d.db")
	s := openSQLite(f, path, dedupe.SQLiteConfig{Location: time.UTC, Now: dedupetest.NewClock(sqliteT0).Now})
	db := rawDB(f, path)
	f.Fuzz(func(t *testing.T, exp string) {
		k := dedupe.Key{Channel: "fuzz", MessageID: "k"}
		_, err := db.Exec("INSERT INTO gateway_dedupe VALUES ('fuzz:k', 'fuzz', 'k', '', ?) ON CONFLICT(dedupe_key) DO UPDATE SET expires_at = excluded.expires_at", exp)
		require.NoError(t, err)
		ok, err := s.Exists(context.Background(), k)
		require.NoError(t, err)
		want := true
		if e, good := referenceTime(exp); good {
			want = sqliteT0.Before(e)
		}
		assert.Equal(t, want, ok, "expires_at %q", exp)
	})
}

var referenceForm = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})?$`)

// referenceTime reads the timestamp forms the store documents with package
// time: naive ISO-8601 in UTC (the test's Location) or RFC 3339, 'T' or ' '
// between date and time, up to nine digits of fraction, zone offsets within
// ±23:59.
func referenceTime(s string) (time.Time, bool) {
	m := referenceForm.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, false
	}
	s = s[:10] + "T" + s[11:]
	if zone := m[2]; zone == "" {
		t, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC)
		return t, err == nil
	} else if zone != "Z" && (zone[1:3] > "23" || zone[4:] > "59") {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}
