package postgres

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest/outage"
)

// openOutage opens a store through addr on the table prefix names, dropped
// at the end of the test.
func openOutage(t *testing.T, addr, prefix string) dedupe.Store {
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	table := "dedupe_test_" + prefix
	t.Cleanup(func() { dropTable(t, table) })
	return newTestStore(t, pool, Config{Table: table})
}

// dropTable drops table, if it exists, through a connection of its own.
func dropTable(t *testing.T, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := adminConn(t)
	_, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+table)
	assert.NoError(t, err, "drop %s", table)
}

// Releases that fail while PostgreSQL is unreachable land once it answers:
// no key stays claimed for the lease.
func TestReleasesLandAfterOutage(t *testing.T) {
	addr := serverAddr(t)
	for _, d := range []time.Duration{3 * time.Second, 12 * time.Second} {
		t.Run(d.String(), func(t *testing.T) { outage.Releases(t, openOutage, addr, 200, d) })
	}
}

// An instance cut off from PostgreSQL ends its handlers' contexts with the
// lease, before another instance can claim their messages.
func TestLeaseEndOnCutOffInstance(t *testing.T) {
	outage.LeaseEnd(t, openOutage, serverAddr(t), 20, 3*time.Second)
}

// serverAddr returns host:port of the test server.
func serverAddr(t *testing.T) string {
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	require.NoError(t, err)
	return net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
}
