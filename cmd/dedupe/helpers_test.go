package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/migrate"
)

// Environment of the tests against real servers, as in the store modules.
const (
	redisEnv   = "DEDUPE_REDIS_ADDR"
	dsnEnv     = "DEDUPE_POSTGRES_DSN"
	requireEnv = "DEDUPE_REQUIRE_SERVERS"
)

func skipOrFail(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv(requireEnv) == "1" {
		require.Fail(tb, msg+" ("+requireEnv+"=1: failing instead of skipping)")
	}
	tb.Skip(msg)
}

func randomID(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(tb, err)
	return hex.EncodeToString(b)
}

// redisURL returns the URL of a Redis store with a key prefix of its own,
// whose keys are deleted when tb ends.
func redisURL(tb testing.TB) string {
	tb.Helper()
	addr := os.Getenv(redisEnv)
	if addr == "" {
		skipOrFail(tb, redisEnv+" is not set (for example 127.0.0.1:6379)")
	}
	prefix := "dedupe-migrate-test:" + randomID(tb) + ":"
	tb.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			if keys = append(keys, iter.Val()); len(keys) == 1000 {
				c.Unlink(ctx, keys...)
				keys = keys[:0]
			}
		}
		if len(keys) > 0 {
			c.Unlink(ctx, keys...)
		}
	})
	return "redis://" + addr + "/0?prefix=" + prefix
}

// postgresURL returns the URL of a PostgreSQL store with a table of its own,
// dropped when tb ends.
func postgresURL(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(dsnEnv)
	if dsn == "" {
		skipOrFail(tb, dsnEnv+" is not set (for example postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	table := "migrate_test_" + randomID(tb)
	tb.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Logf("drop %s: %v", table, err)
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, `DROP TABLE IF EXISTS `+table)
	})
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "table=" + table
}

// open opens the store raw names, closed when tb ends.
func open(tb testing.TB, raw string) *store {
	tb.Helper()
	s, err := openStore(context.Background(), raw, dest)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = s.close() })
	return s
}

// marks returns every mark of s that has not expired, by key.
func marks(tb testing.TB, s dedupe.Store) map[dedupe.Key]time.Time {
	tb.Helper()
	if w, ok := s.(*store); ok {
		s = w.Store
	}
	l := s.(dedupe.Lister)
	got := map[dedupe.Key]time.Time{}
	cursor := ""
	now := time.Now()
	for {
		next, err := l.ListMarks(context.Background(), cursor, 5000, func(k dedupe.Key, exp time.Time) {
			if exp.IsZero() || exp.After(now) {
				got[k] = exp
			}
		})
		require.NoError(tb, err)
		if next == "" {
			return got
		}
		cursor = next
	}
}

// nekoFile is a SQLite file in NekoBot's layout, made as NekoBot makes it
// (its table, its index, a rollback journal, naive UTC times with
// microseconds), holding generated marks.
type nekoFile struct {
	path    string
	live    map[dedupe.Key]time.Time // the marks that outlive the test
	expired int
}

// writeNekoFile writes n marks to a new NekoBot file: one in expiredEvery
// expired an hour ago, the others expiring from 1 to 24 hours from now.
func writeNekoFile(tb testing.TB, n, expiredEvery int) *nekoFile {
	tb.Helper()
	f := &nekoFile{path: filepath.Join(tb.TempDir(), "gateway.db"), live: make(map[dedupe.Key]time.Time, n)}
	db, err := sql.Open("sqlite", "file:"+f.path+"?_pragma=journal_mode(DELETE)&_pragma=synchronous(OFF)")
	require.NoError(tb, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	exec := func(q string, args ...any) {
		_, err := db.Exec(q, args...)
		require.NoError(tb, err)
	}
	exec(`CREATE TABLE gateway_dedupe (dedupe_key TEXT PRIMARY KEY, channel_id TEXT NOT NULL, message_id TEXT NOT NULL, created_at TEXT NOT NULL, expires_at TEXT)`)
	exec(`CREATE INDEX idx_gateway_dedupe_expires ON gateway_dedupe(expires_at)`)
	exec(`BEGIN`)
	stmt, err := db.Prepare(`INSERT INTO gateway_dedupe VALUES (?, ?, ?, ?, ?)`)
	require.NoError(tb, err)
	now := time.Now().UTC()
	channels := []string{"qq", "telegram", "discord", "web"}
	for i := range n {
		k := dedupe.Key{Channel: channels[i%len(channels)], MessageID: strconv.Itoa(1_000_000_000 + i*7919%n)}
		if k.Channel == "web" {
			k.MessageID = "room:" + k.MessageID // NekoBot keys with ':' in the id
		}
		exp := now.Add(time.Hour + time.Duration(i%(23*3600))*time.Second + time.Duration(i%1000)*time.Microsecond)
		if expiredEvery > 0 && i%expiredEvery == 0 {
			exp = now.Add(-time.Hour)
			f.expired++
		} else {
			f.live[k] = exp
		}
		id := k.MessageID[strings.LastIndexByte(k.MessageID, ':')+1:]
		_, err = stmt.Exec(k.String(), k.Channel, id, pyISO(now), pyISO(exp))
		require.NoError(tb, err)
	}
	_ = stmt.Close()
	exec(`COMMIT`)
	require.Equal(tb, n, len(f.live)+f.expired, "generated %d live and %d expired keys, want %d in all", len(f.live), f.expired, n)
	return f
}

// pyISO formats t as Python's datetime.isoformat of a naive time.
func pyISO(t time.Time) string {
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05")
	}
	return t.Format("2006-01-02T15:04:05.000000")
}

// url returns the file's store URL.
func (f *nekoFile) url() string { return "sqlite:" + f.path + "?tz=UTC" }

// checkCopied checks that dst holds every mark of want with an expiry within
// a second of want's, and nothing else, and asks Exists of a sample of keys.
func checkCopied(tb testing.TB, dst dedupe.Store, want map[dedupe.Key]time.Time) {
	tb.Helper()
	if w, ok := dst.(*store); ok {
		dst = w.Store
	}
	got := marks(tb, dst)
	bad := 0
	for k, exp := range want {
		g, ok := got[k]
		if d := g.Sub(exp); !ok || math.Abs(d.Seconds()) >= 1 {
			if bad++; bad <= 5 {
				assert.Failf(tb, "mark missing or off", "%s: expiry %v (present %v), want %v", k, g, ok, exp)
			}
		}
	}
	require.Zero(tb, bad, "%d of %d marks missing or off; %d marks at the destination", bad, len(want), len(got))
	require.Equal(tb, len(want), len(got), "%d of %d marks missing or off; %d marks at the destination", bad, len(want), len(got))
	i := 0
	for k := range want {
		if i++; i%max(1, len(want)/200) != 0 {
			continue
		}
		ok, err := dst.Exists(context.Background(), k)
		require.NoError(tb, err, "Exists(%s)", k)
		require.True(tb, ok, "Exists(%s)", k)
	}
}

// runCmd runs the command line in this process and returns its exit status
// and output.
func runCmd(tb testing.TB, args ...string) (int, string, string) {
	tb.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// summaryOf parses the summary lines of "dedupe migrate".
func summaryOf(tb testing.TB, out string) migrate.Summary {
	tb.Helper()
	var s migrate.Summary
	fields := map[string]*int64{"listed:": &s.Listed, "copied:": &s.Copied, "would copy:": &s.Copied,
		"already present:": &s.Present, "skipped as expired:": &s.Expired, "skipped as invalid:": &s.Invalid}
	found := 0
	for _, line := range strings.Split(out, "\n") {
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if p, ok := fields[strings.TrimSpace(line[:i])]; ok {
			n, err := strconv.ParseInt(line[i+1:], 10, 64)
			require.NoError(tb, err, "summary line %q", line)
			*p = n
			found++
		}
	}
	require.Equal(tb, 5, found, "no summary in:\n%s", out)
	return s
}
