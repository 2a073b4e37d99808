package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dsnEnv names the environment variable holding the test server's DSN.
const dsnEnv = "DEDUPE_POSTGRES_DSN"

// requireEnv names the environment variable that, set to 1, turns the skip of
// a test whose server is not configured into a failure: a run meant to have
// the servers, such as .ci/run, then cannot pass with the store tests skipped.
const requireEnv = "DEDUPE_REQUIRE_SERVERS"

// testDSN returns the test server's DSN, or skips tb when it is not set
// (fails it when DEDUPE_REQUIRE_SERVERS=1).
func testDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(dsnEnv)
	if dsn == "" {
		msg := dsnEnv + " is not set: skipping the tests against a PostgreSQL server " +
			"(for example " + dsnEnv + "=postgres://postgres@127.0.0.1:5432/test?sslmode=disable)"
		if os.Getenv(requireEnv) == "1" {
			require.Fail(tb, msg+" ("+requireEnv+"=1: failing instead of skipping)")
		}
		tb.Skip(msg)
	}
	return dsn
}

func randomHex(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(tb, err)
	return hex.EncodeToString(b)
}

// newPool returns a pool on the test server, closed when tb ends. A non-empty
// app sets the connections' application_name, so that tests can find them in
// pg_stat_activity; maxConns > 0 bounds the pool.
func newPool(tb testing.TB, app string, maxConns int32) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN(tb))
	require.NoError(tb, err, "parse %s", dsnEnv)
	if app != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = app
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(tb, err, "pool")
	tb.Cleanup(pool.Close)
	return pool
}

// adminConn returns a connection of its own to the test server, closed when
// tb ends: the tests' view of the database, apart from the pools under test.
func adminConn(tb testing.TB) *pgx.Conn {
	tb.Helper()
	conn, err := pgx.Connect(context.Background(), testDSN(tb))
	require.NoError(tb, err, "connect")
	tb.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// testTable returns a table name unique to this run, whose table (and the
// function of the partitioned layout) is dropped when tb ends, so that parallel and repeated runs do not interfere.
func testTable(tb testing.TB) string {
	tb.Helper()
	name := "dedupe_test_" + randomHex(tb, 6)
	dsn := testDSN(tb)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if !assert.NoError(tb, err, "drop %s", name) {
			return
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP TABLE IF EXISTS "+name+"; DROP FUNCTION IF EXISTS "+name+addFnSuffix+"(timestamptz)")
		assert.NoError(tb, err, "drop %s", name)
	})
	return name
}

// newTestStore returns a store on a new table of pool, closed when tb ends.
func newTestStore(tb testing.TB, pool *pgxpool.Pool, cfg Config) *Store {
	tb.Helper()
	if cfg.Table == "" {
		cfg.Table = testTable(tb)
	}
	s, err := New(context.Background(), pool, cfg)
	require.NoError(tb, err, "New")
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// holdExclusively counts c in claims, fails t if another caller holds c's key
// at the same moment (tracked in holders), and releases c. It reports whether
// the release succeeded.
func holdExclusively(t *testing.T, s dedupe.Store, c dedupe.Claim, holders, claims *atomic.Int64) bool {
	claims.Add(1)
	assert.Equal(t, int64(1), holders.Add(1), "callers holding %s at once", c.Key)
	holders.Add(-1)
	return assert.NoError(t, s.Release(context.Background(), c), "Release")
}

// claimNew claims key on st with a new token: the claim, its status and the
// error.
func claimNew(ctx context.Context, st dedupe.Store, key dedupe.Key, lease time.Duration) (dedupe.Claim, dedupe.Status, error) {
	c := dedupe.NewClaim(key)
	status, err := st.Claim(ctx, c, lease)
	return c, status, err
}

// recorder is a slog.Handler that counts a store's records by message, and
// passes the number of rows deleted by each sweep to sweeps, if it is set:
// the tests watch the store's background work through its Logger.
type recorder struct {
	mu     sync.Mutex
	counts map[string]int
	sweeps chan<- int64
}

func newRecorder() *recorder { return &recorder{counts: make(map[string]int)} }

func (r *recorder) logger() *slog.Logger { return slog.New(r) }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.counts[rec.Message]++
	r.mu.Unlock()
	if rec.Message == msgSweep && r.sweeps != nil {
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "deleted" {
				select {
				case r.sweeps <- a.Value.Int64():
				default: // the test stopped counting
				}
			}
			return true
		})
	}
	return nil
}

func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// count returns how many records with message msg were handled.
func (r *recorder) count(msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[msg]
}

// lockRow inserts an expired row of key into table in a transaction of a
// connection of its own, and leaves it open: statements that write the key
// wait for it until rollback is called (at the end of the test at the
// latest).
func lockRow(tb testing.TB, table string, key dedupe.Key) (rollback func()) {
	tb.Helper()
	ctx := context.Background()
	tx, err := adminConn(tb).Begin(ctx)
	require.NoError(tb, err)
	rollback = func() {
		if err := tx.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
			assert.NoError(tb, err)
		}
	}
	tb.Cleanup(rollback)
	_, err = tx.Exec(ctx, `INSERT INTO `+table+` (key, token, expires_at) VALUES ($1, NULL, now() - interval '1 hour')`, key.String())
	require.NoError(tb, err)
	return rollback
}
