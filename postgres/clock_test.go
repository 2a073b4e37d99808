package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// serverClock is an injected clock on the test server: a schema of the test's
// own holding a function now() that returns the server's now plus an offset
// the test sets. Connections whose search_path puts that schema before
// pg_catalog call it for every now() of the store's statements, so the
// store keeps deciding time on the server, by a clock the test moves.
type serverClock struct {
	schema string
	admin  *pgx.Conn
}

// newServerClock creates the clock's schema, dropped with everything in it
// when tb ends.
func newServerClock(tb testing.TB) *serverClock {
	tb.Helper()
	ctx := context.Background()
	c := &serverClock{schema: "dedupe_clock_" + randomHex(tb, 6), admin: adminConn(tb)}
	_, err := c.admin.Exec(ctx, `CREATE SCHEMA `+c.schema+`;
CREATE TABLE `+c.schema+`.clock_offset (d interval NOT NULL);
INSERT INTO `+c.schema+`.clock_offset VALUES ('0');
CREATE FUNCTION `+c.schema+`.now() RETURNS timestamptz LANGUAGE sql STABLE
	AS 'SELECT pg_catalog.now() + (SELECT d FROM `+c.schema+`.clock_offset)'`)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testDSN(tb))
		if !assert.NoError(tb, err, "drop schema %s", c.schema) {
			return
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `DROP SCHEMA `+c.schema+` CASCADE`)
		assert.NoError(tb, err, "drop schema %s", c.schema)
	})
	return c
}

// pool returns a pool whose connections read the clock, closed when tb ends.
func (c *serverClock) pool(tb testing.TB, maxConns int32) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN(tb))
	require.NoError(tb, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = c.schema + ", pg_catalog, public"
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(tb, err)
	tb.Cleanup(pool.Close)
	return pool
}

// table returns a table name in the clock's schema.
func (c *serverClock) table(tb testing.TB) string {
	return c.schema + ".keys_" + randomHex(tb, 4)
}

// advance moves the clock d forward.
func (c *serverClock) advance(tb testing.TB, d time.Duration) {
	tb.Helper()
	_, err := c.admin.Exec(context.Background(), `UPDATE `+c.schema+`.clock_offset SET d = d + $1::bigint * interval '1 microsecond'`,
		micros(d))
	require.NoError(tb, err)
}

// now returns the clock's time.
func (c *serverClock) now(tb testing.TB) time.Time {
	tb.Helper()
	var t time.Time
	require.NoError(tb, c.admin.QueryRow(context.Background(), `SELECT `+c.schema+`.now()`).Scan(&t))
	return t
}

// TestServerClock checks that the store's statements read the injected
// clock: a mark for an hour expires when the clock moves past it.
func TestServerClock(t *testing.T) {
	c := newServerClock(t)
	pool := c.pool(t, 2)
	for _, part := range []bool{false, true} {
		s := newTestStore(t, pool, Config{Table: c.table(t), Partitioned: part})
		k := testKey(t, "clock")
		require.NoError(t, s.Mark(context.Background(), k, time.Hour))
		ok, err := s.Exists(context.Background(), k)
		require.NoError(t, err, "partitioned %v: Exists", part)
		require.True(t, ok, "partitioned %v: Exists", part)
		c.advance(t, time.Hour)
		ok, err = s.Exists(context.Background(), k)
		require.NoError(t, err, "partitioned %v: Exists an hour later", part)
		require.False(t, ok, "partitioned %v: Exists an hour later", part)
	}
}

// testKey returns a key of channel ch unique to this run.
func testKey(tb testing.TB, ch string) dedupe.Key {
	return dedupe.Key{Channel: ch, MessageID: randomHex(tb, 6)}
}
