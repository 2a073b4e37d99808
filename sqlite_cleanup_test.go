package dedupe_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

func TestSQLiteCleanupExpired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	clock := dedupetest.NewClock(sqliteT0)
	s := openSQLite(t, path, dedupe.SQLiteConfig{Now: clock.Now, Location: time.UTC, CleanupBatch: 100})
	ctx := context.Background()
	db := rawDB(t, path)

	n, err := s.CleanupExpired(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "empty store")

	const short, long = 350, 40
	claims := fillForCleanup(t, s, db, short, long)

	clock.Advance(10 * time.Minute) // 20:40: the short ones have expired
	n, err = s.CleanupExpired(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2*short+3, n, "expired marks and claims in the store's format, and the three other expired rows")

	count := func(q string) int {
		var n int
		require.NoError(t, db.QueryRow(q).Scan(&n))
		return n
	}
	assert.Equal(t, long+3+250+1, count("SELECT count(*) FROM gateway_dedupe"))
	assert.Equal(t, long, count("SELECT count(*) FROM gateway_dedupe_claims"))
	for _, k := range []string{"x:null", "x:garbage", "x:0000", "x:west-7", "x:east-expired", "M:1"} {
		assert.Equal(t, 1, count("SELECT count(*) FROM gateway_dedupe WHERE dedupe_key = '"+k+"'"), k)
	}
	for i := range long {
		ok, err := s.Exists(ctx, dedupe.Key{Channel: "M", MessageID: fmt.Sprint(i)})
		require.NoError(t, err)
		assert.True(t, ok)
		_, cSt, err := claimNew(ctx, s, dedupe.Key{Channel: "C", MessageID: fmt.Sprint(i)}, 0)
		require.NoError(t, err)
		assert.Equal(t, dedupe.InFlight, cSt)
	}
	assert.ErrorIs(t, s.Release(ctx, claims[0]), dedupe.ErrNotOwner)

	// Cleanup again: nothing new.
	n, err = s.CleanupExpired(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)

	// Later the east row's text sorts before the clock too.
	clock.Set(time.Date(2026, 11, 29, 22, 0, 1, 0, time.UTC))
	n, err = s.CleanupExpired(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2*long+1, n)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.CleanupExpired(cctx)
	assert.ErrorIs(t, err, context.Canceled)
	require.NoError(t, s.Close())
	_, err = s.CleanupExpired(ctx)
	assert.ErrorIs(t, err, dedupe.ErrClosed)
}

// fillForCleanup marks short keys m:i and claims short keys c:i for a minute,
// marks long keys M:i and claims long keys C:i for an hour, and writes marks
// in other formats than the store's: kept forever, or expired in an offset
// NekoBot's text comparison and ours would read late, or live though their
// text sorts early (250 of them, more than a batch). It returns the short
// claims.
func fillForCleanup(t *testing.T, s *dedupe.SQLiteStore, db *sql.DB, short, long int) []dedupe.Claim {
	t.Helper()
	ctx := context.Background()
	var claims []dedupe.Claim
	for i := range short {
		require.NoError(t, s.Mark(ctx, dedupe.Key{Channel: "m", MessageID: fmt.Sprint(i)}, time.Minute))
		c, _, err := claimNew(ctx, s, dedupe.Key{Channel: "c", MessageID: fmt.Sprint(i)}, time.Minute)
		require.NoError(t, err)
		claims = append(claims, c)
	}
	for i := range long {
		require.NoError(t, s.Mark(ctx, dedupe.Key{Channel: "M", MessageID: fmt.Sprint(i)}, time.Hour))
		_, _, err := claimNew(ctx, s, dedupe.Key{Channel: "C", MessageID: fmt.Sprint(i)}, time.Hour)
		require.NoError(t, err)
	}
	insert := func(key string, expires any) {
		_, err := db.Exec("INSERT INTO gateway_dedupe VALUES (?, 'x', 'x', '2026-11-29T20:00:00', ?)", key, expires)
		require.NoError(t, err)
	}
	insert("x:null", nil)
	insert("x:garbage", "garbage")
	insert("x:0000", "0000-00-00")
	insert("x:z-expired", "2026-11-29T20:05:00Z")
	insert("x:space-expired", "2026-11-29 20:05:00")
	insert("x:milli-expired", "2026-11-29T20:05:00.123")
	for i := range 250 {
		insert(fmt.Sprintf("x:west-%d", i), fmt.Sprintf("2026-11-29T20:%02d:00-05:00", i%60)) // 01:xx next day UTC
	}
	insert("x:east-expired", "2026-11-29T22:00:00+05:00") // 17:00Z, but its text sorts after 20:40
	return claims
}

func TestSQLiteSweeper(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	synctest.Test(t, func(t *testing.T) {
		clock := dedupetest.NewClock(sqliteT0)
		s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{Now: clock.Now, CleanupInterval: time.Minute})
		require.NoError(t, err)
		ctx := context.Background()
		require.NoError(t, s.Mark(ctx, dedupe.Key{Channel: "s", MessageID: "short"}, 30*time.Second))
		require.NoError(t, s.Mark(ctx, dedupe.Key{Channel: "s", MessageID: "long"}, time.Hour))
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		rows := func() int {
			var n int
			require.NoError(t, db.QueryRow("SELECT count(*) FROM gateway_dedupe").Scan(&n))
			return n
		}
		clock.Advance(40 * time.Second)
		time.Sleep(59 * time.Second)
		synctest.Wait()
		assert.Equal(t, 2, rows(), "no sweep before the interval")
		time.Sleep(time.Second) // the sweeper's first tick
		synctest.Wait()         // and its cleanup, done
		assert.Equal(t, 1, rows(), "the sweep removed the expired mark")
		require.NoError(t, db.Close())
		require.NoError(t, s.Close()) // stops and waits for the sweeper: synctest fails on a leaked goroutine
		require.NoError(t, s.Close())
	})
}

// TestSQLiteSweeperLogsErrors makes the sweeper's cleanup fail on a real
// file, where a trigger refuses to delete an expired mark, and finds the error
// in the configured Logger, once per failed sweep.
func TestSQLiteSweeperLogsErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	synctest.Test(t, func(t *testing.T) {
		clock := dedupetest.NewClock(sqliteT0)
		var logs bytes.Buffer // written by the sweeper, read once Close has stopped it
		s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{
			Now: clock.Now, CleanupInterval: time.Minute, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		})
		require.NoError(t, err)
		require.NoError(t, s.Mark(context.Background(), dedupe.Key{Channel: "s", MessageID: "1"}, time.Second))
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		_, err = db.Exec(`CREATE TRIGGER keep_marks BEFORE DELETE ON gateway_dedupe BEGIN SELECT RAISE(ABORT, 'marks are kept'); END`)
		require.NoError(t, err)
		require.NoError(t, db.Close())

		clock.Advance(time.Hour)
		time.Sleep(2 * time.Minute) // two ticks
		synctest.Wait()             // and their cleanups, done
		require.NoError(t, s.Close())

		dec := json.NewDecoder(&logs)
		for range 2 {
			var rec map[string]any
			require.NoError(t, dec.Decode(&rec))
			assert.Equal(t, "WARN", rec["level"])
			assert.Equal(t, "dedupe: sqlite: background cleanup failed", rec["msg"])
			assert.Equal(t, "gateway_dedupe", rec["table"])
			assert.EqualValues(t, 0, rec["deleted"])
			assert.Contains(t, rec["error"], "dedupe: sqlite: cleanup gateway_dedupe: ")
			assert.Contains(t, rec["error"], "marks are kept")
		}
		assert.False(t, dec.More(), "one record per failed sweep, none for Close: %s", logs.String())
	})
}
