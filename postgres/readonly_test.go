package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// relations counts the relations whose name starts with table's: the table,
// its indexes and its partitions.
func relations(t *testing.T, table string) int {
	t.Helper()
	var n int
	require.NoError(t, adminConn(t).QueryRow(context.Background(),
		`SELECT count(*) FROM pg_class WHERE relname LIKE $1`, table+"%").Scan(&n))
	return n
}

// withQuery adds the query options q to the test server's DSN.
func withQuery(t *testing.T, q string) string {
	dsn := testDSN(t)
	if strings.Contains(dsn, "?") {
		return dsn + "&" + q
	}
	return dsn + "?" + q
}

// A ReadOnly store on a missing table is an error naming it, and creates it
// not.
func TestReadOnlyMissingTable(t *testing.T) {
	pool := newPool(t, "", 0)
	table := testTable(t)
	_, err := New(context.Background(), pool, Config{Table: table, ReadOnly: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `table "`+table+`" does not exist`)
	assert.Zero(t, relations(t, table), "created")
}

// A ReadOnly store opens a partitioned table in its own layout without
// being told, reads it, refuses every write with ErrReadOnly, and creates
// no partition, index or table.
func TestReadOnlyPartitioned(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, "", 0)
	table := testTable(t)
	w := newTestStore(t, pool, Config{Table: table, Partitioned: true, PartitionSpan: time.Hour})
	k := dedupe.Key{Channel: "qq", MessageID: "1"}
	require.NoError(t, w.Mark(ctx, k, time.Hour))
	require.NoError(t, w.Close())
	before := relations(t, table)

	s, err := Open(ctx, withQuery(t, "table="+table), Config{ReadOnly: true, TTL: 72 * time.Hour})
	require.NoError(t, err)
	defer s.Close()
	ok, err := s.Exists(ctx, k)
	require.NoError(t, err)
	assert.True(t, ok)
	marks, _, _, _, err := s.CountLive(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), marks)
	assert.ErrorIs(t, s.Mark(ctx, k, 0), dedupe.ErrReadOnly)
	_, err = s.Claim(ctx, dedupe.NewClaim(dedupe.Key{Channel: "qq", MessageID: "2"}), 0)
	assert.ErrorIs(t, err, dedupe.ErrReadOnly)
	_, err = s.MarkUntil(ctx, []dedupe.Key{k}, []time.Time{time.Now().Add(time.Hour)})
	assert.ErrorIs(t, err, dedupe.ErrReadOnly)
	_, err = s.CleanupExpired(ctx)
	assert.ErrorIs(t, err, dedupe.ErrReadOnly)
	_, err = s.Forget(ctx, k)
	assert.ErrorIs(t, err, dedupe.ErrReadOnly)
	ok, err = s.Exists(ctx, k)
	require.NoError(t, err)
	assert.True(t, ok, "a refused Forget dropped the mark")
	assert.Equal(t, before, relations(t, table), "partitions created (a TTL of 72 h would add 48)")
}

// AdoptLayout opens a partitioned table that Partitioned does not name, and
// writes to it; without it the table is refused as before.
func TestAdoptLayout(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, "", 0)
	table := testTable(t)
	newTestStore(t, pool, Config{Table: table, Partitioned: true, PartitionSpan: 2 * time.Hour})

	_, err := New(ctx, pool, Config{Table: table})
	assert.ErrorContains(t, err, "is partitioned, but Config.Partitioned is false")
	s, err := New(ctx, pool, Config{Table: table, AdoptLayout: true})
	require.NoError(t, err)
	defer s.Close()
	k := dedupe.Key{Channel: "qq", MessageID: "1"}
	require.NoError(t, s.Mark(ctx, k, time.Hour))
	ok, err := s.Exists(ctx, k)
	require.NoError(t, err)
	assert.True(t, ok)
}

// Open takes the dedupe command's URL options (docs/urls.md) and sends none
// of them to the server.
func TestOpenURLOptions(t *testing.T) {
	ctx := context.Background()
	table := testTable(t)
	s, err := Open(ctx, withQuery(t, "table="+table+"&partitioned=true&partition_span=1h"), Config{})
	require.NoError(t, err)
	require.NoError(t, s.Mark(ctx, dedupe.Key{Channel: "qq", MessageID: "1"}, time.Hour))
	require.NoError(t, s.Close())
	var comment string
	require.NoError(t, adminConn(t).QueryRow(ctx, `SELECT obj_description(to_regclass($1), 'pg_class')`, table).Scan(&comment))
	assert.Contains(t, comment, "partitions of 60 minutes")

	for _, bad := range []string{"partitioned=maybe", "partition_span=-1h", "partition_span=day"} {
		_, err := Open(ctx, withQuery(t, "table="+table+"&"+bad), Config{})
		assert.ErrorContains(t, err, strings.Split(bad, "=")[0], bad)
	}
}
