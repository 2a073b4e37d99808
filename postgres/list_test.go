package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The walk and the bulk writes of package migrate at the scale of a copy and
// on PostgreSQL's own terms (dedupetest's Lister and BulkMarker groups check
// the contract on a few keys): MarkUntil writes 1,200 marks with their own
// expiries over a claim, ListMarks walks them in key order, pages resumed
// from the last key, with expired rows and no claims, on a table with a
// column of its own that the store does not know; the partitioned layout
// reports a size per partition.
func TestListMarksAndMarkUntil(t *testing.T) {
	t.Parallel()
	table := testTable(t)
	conn := adminConn(t)
	_, err := conn.Exec(context.Background(), `CREATE TABLE `+table+` (note text DEFAULT 'x', key text COLLATE "C" PRIMARY KEY, token text, expires_at timestamptz NOT NULL, result bytea)`)
	require.NoError(t, err)
	checkListMarks(t, newTestStore(t, newPool(t, "", 0), Config{Table: table}), table, 1)
}

// The same on the partitioned layout, whose table has no unique key and
// whose partitions MarkUntil creates as the expiries need them.
func TestListMarksAndMarkUntilPartitioned(t *testing.T) {
	t.Parallel()
	table := testTable(t)
	s := newTestStore(t, newPool(t, "", 0), Config{Table: table, Partitioned: true, PartitionSpan: time.Hour})
	checkListMarks(t, s, table, 3)
	checkOneRowPerKey(t, table)
}

// checkListMarks runs the test of ListMarks and MarkUntil on s, whose table
// has at least minSizes sizes to report.
func checkListMarks(t *testing.T, s *Store, table string, minSizes int) {
	ctx := context.Background()
	const n = 1200
	keys := make([]dedupe.Key, n)
	exps := make([]time.Time, n)
	for i := range keys {
		keys[i] = dedupe.Key{Channel: "qq", MessageID: fmt.Sprintf("%05d", i)}
		exps[i] = time.Now().Add(time.Hour + time.Duration(i)*time.Second)
	}
	claim := dedupe.NewClaim(keys[0])
	_, err := s.Claim(ctx, claim, time.Hour)
	require.NoError(t, err)
	present, err := s.MarkUntil(ctx, keys[1:], exps[1:])
	require.NoError(t, err, "MarkUntil")
	require.Equal(t, 0, present, "MarkUntil: present")
	require.NoError(t, s.Mark(ctx, dedupe.Key{Channel: "aa", MessageID: "expired"}, time.Millisecond))
	// Over the claim and every mark again, one shorter: all present but the claimed key.
	short := append([]time.Time(nil), exps...)
	short[1] = time.Now().Add(time.Minute)
	present, err = s.MarkUntil(ctx, keys, short)
	require.NoError(t, err, "MarkUntil again")
	require.Equal(t, n-1, present, "MarkUntil again: present")
	var last string
	listed := 0
	cursor := ""
	for {
		next, err := s.ListMarks(ctx, cursor, 97, func(k dedupe.Key, exp time.Time) {
			listed++
			require.Greater(t, k.String(), last, "%s after %s: not in key order", k, last)
			last = k.String()
			if k.Channel == "aa" {
				assert.False(t, exp.After(time.Now()), "the expired mark is listed with expiry %v", exp)
				return
			}
			i, _ := strconv.Atoi(k.MessageID)
			assert.WithinDuration(t, exps[i], exp, 500*time.Millisecond, "%s: expiry", k)
		})
		require.NoError(t, err)
		if next == "" {
			break
		}
		cursor = next
	}
	require.Equal(t, n+1, listed, "marks listed")
	sizes, err := s.Sizes(ctx)
	require.NoError(t, err, "Sizes")
	require.GreaterOrEqual(t, len(sizes), minSizes, "Sizes: %v", sizes)
}

// SharedBuffers is the server's shared_buffers in bytes, as SHOW prints it
// in units ("128MB").
func TestSharedBuffers(t *testing.T) {
	pool := newPool(t, "", 2)
	s := newTestStore(t, pool, Config{})
	got, err := s.SharedBuffers(context.Background())
	require.NoError(t, err)
	var shown string
	require.NoError(t, pool.QueryRow(context.Background(), `SHOW shared_buffers`).Scan(&shown))
	units := map[string]int64{"kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
	num := strings.TrimRight(shown, "kMGTB")
	n, err := strconv.ParseInt(num, 10, 64)
	require.NoError(t, err, "SHOW shared_buffers = %q", shown)
	assert.Equal(t, n*units[shown[len(num):]], got, "SHOW shared_buffers = %q", shown)
	require.NoError(t, s.Close())
	_, err = s.SharedBuffers(context.Background())
	assert.ErrorIs(t, err, dedupe.ErrClosed)
}
