package postgres

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The walk and the bulk writes of package migrate: MarkUntil writes marks
// with their own expiries (never shortening a live mark, replacing a claim,
// leaving a released key's fences to be replaced), ListMarks walks them in
// key order, pages resumed from the last key, with expired rows and no
// claims, CountLive counts, and all of it on a table with a column of its
// own that the store does not know.
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
	// The claim is listed by neither; CountLive sees it.
	marks, claims, oldest, newest, err := s.CountLive(ctx)
	require.NoError(t, err, "CountLive")
	require.GreaterOrEqual(t, marks, int64(n-2), "CountLive: marks")
	require.LessOrEqual(t, marks, int64(n-1), "CountLive: marks")
	require.Equal(t, int64(1), claims, "CountLive: claims")
	require.WithinDuration(t, exps[1], oldest, 500*time.Millisecond, "CountLive: oldest")
	require.WithinDuration(t, exps[n-1], newest, 500*time.Millisecond, "CountLive: newest")
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
	// A live mark keeps its result when a copy lengthens it.
	rk := dedupe.Key{Channel: "qq", MessageID: "with-result"}
	require.NoError(t, s.MarkResult(ctx, rk, []byte("reply"), time.Minute))
	present, err = s.MarkUntil(ctx, []dedupe.Key{rk}, []time.Time{time.Now().Add(time.Hour)})
	require.NoError(t, err, "MarkUntil over a mark with a result")
	require.Equal(t, 1, present, "MarkUntil over a mark with a result: present")
	res, ok, err := s.Result(ctx, rk)
	require.NoError(t, err, "Result after MarkUntil")
	require.True(t, ok, "Result after MarkUntil")
	require.Equal(t, "reply", string(res), "Result after MarkUntil")
	sizes, err := s.Sizes(ctx)
	require.NoError(t, err, "Sizes")
	require.GreaterOrEqual(t, len(sizes), minSizes, "Sizes: %v", sizes)
}
