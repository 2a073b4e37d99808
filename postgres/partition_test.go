package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// TestConformancePartitioned runs the conformance suite on the partitioned
// layout, with partitions of an hour (the suite's stores of a 24 h TTL then
// have 25 ahead). A store asked to be isolated gets a table of its own,
// checked for one row per key before it is dropped.
func TestConformancePartitioned(t *testing.T) {
	pool := newPool(t, "", 0)
	table := testTable(t)
	dedupetest.Run(t, dedupetest.Config{
		RealTime: true,
		Unit:     conformanceUnit,
		New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
			table := table
			if o.Isolated {
				table = testTable(t)
				t.Cleanup(func() { checkOneRowPerKey(t, table) }) // before the drop
			}
			s, err := New(context.Background(), pool, Config{Table: table, TTL: o.TTL, Lease: o.Lease,
				Partitioned: true, PartitionSpan: time.Hour})
			require.NoError(t, err, "New")
			return s
		},
	})
	checkOneRowPerKey(t, table)
}

// checkOneRowPerKey fails t if a key has more than one row in table.
func checkOneRowPerKey(t *testing.T, table string) {
	t.Helper()
	var keys, dups int
	require.NoError(t, adminConn(t).QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE n > 1)
FROM (SELECT count(*) AS n FROM `+table+` GROUP BY key) k`).Scan(&keys, &dups))
	require.Zero(t, dups, "keys of %d that have more than one row", keys)
}

// partState is where a key's row is: its count of rows, its partition
// and expiry, read by the test's own connection.
type partState struct {
	rows      int
	partition string
	expires   time.Time
	token     *string
}

func readPart(t *testing.T, c *serverClock, table string, k dedupe.Key) partState {
	t.Helper()
	var p partState
	err := c.admin.QueryRow(context.Background(), `SELECT count(*) OVER (), tableoid::regclass::text, expires_at, token
FROM `+table+` WHERE key = $1`, k.String()).Scan(&p.rows, &p.partition, &p.expires, &p.token)
	if !isNoRows(err) {
		require.NoError(t, err)
	}
	return p
}

// wantPartition returns the partition that a row expiring at exp belongs in,
// for partitions of span.
func wantPartition(c *serverClock, table string, exp time.Time, span time.Duration) string {
	lo := exp.Truncate(span).UTC()
	return c.schema + "." + table[len(c.schema)+1:] + partSuffix + lo.Format("200601021504")
}

// TestPartitionBoundaries moves an injected clock in steps of 25 minutes over
// five boundaries of hourly partitions, with marks of several TTLs (one
// longer than the partitions created ahead), claims extended across
// boundaries and a key marked again at every step, and a cleanup at every
// step. At every step each key has at most one row, in the partition of its
// expiry, and is marked, claimed or absent as its expiry says; no live mark is
// ever lost to a dropped partition, and partitions are dropped.
func TestPartitionBoundaries(t *testing.T) {
	const span = time.Hour
	c := newServerClock(t)
	pool := c.pool(t, 4)
	table := c.table(t)
	s := newTestStore(t, pool, Config{Table: table, Partitioned: true, PartitionSpan: span,
		TTL: time.Hour, Lease: 10 * time.Minute})
	ctx := context.Background()
	c.advance(t, c.now(t).Truncate(span).Add(span+5*time.Minute).Sub(c.now(t))) // just past a boundary

	type entry struct {
		key     dedupe.Key
		claim   *dedupe.Claim // the holder's, for a claim
		expires time.Time     // as the test's model has it
	}
	var entries []*entry
	for _, ttl := range []time.Duration{40 * time.Minute, 95 * time.Minute, 160 * time.Minute, 215 * time.Minute, 310 * time.Minute} {
		e := &entry{key: testKey(t, "mark"), expires: c.now(t).Add(ttl)}
		require.NoError(t, s.MarkResult(ctx, e.key, []byte(ttl.String()), ttl))
		entries = append(entries, e)
	}
	for _, lease := range []time.Duration{15 * time.Minute, 70 * time.Minute} {
		cl, st, err := claimNew(ctx, s, testKey(t, "claim"), lease)
		require.NoError(t, err, "Claim")
		require.Equal(t, dedupe.Claimed, st, "Claim")
		entries = append(entries, &entry{key: cl.Key, claim: &cl, expires: c.now(t).Add(lease)})
	}
	moving := &entry{key: testKey(t, "moving")}
	entries = append(entries, moving)

	var dropped int64
	for step := range 12 {
		now := c.now(t)
		// The key marked again at every step hops to a later partition.
		require.NoError(t, s.Mark(ctx, moving.key, 95*time.Minute))
		moving.expires = now.Add(95 * time.Minute)
		// The long claim's holder extends it across the next boundary.
		if cl := entries[len(entries)-2]; cl.expires.After(now) && step < 6 {
			require.NoError(t, s.Extend(ctx, *cl.claim, 70*time.Minute), "step %d: Extend", step)
			cl.expires = now.Add(70 * time.Minute)
		}
		for _, e := range entries {
			checkEntry(t, c, s, table, span, step, e.key, e.claim != nil, e.expires)
		}
		n, err := s.CleanupExpired(ctx)
		require.NoError(t, err, "step %d: CleanupExpired", step)
		dropped += n
		for _, e := range entries { // the cleanup took nothing live
			checkEntry(t, c, s, table, span, step, e.key, e.claim != nil, e.expires)
		}
		c.advance(t, 25*time.Minute)
	}
	require.NotZero(t, dropped, "no row was dropped with its partition")
	var parts int
	require.NoError(t, c.admin.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = $1::regclass`, table).Scan(&parts))
	t.Logf("%d expired rows dropped with their partitions; %d partitions left", dropped, parts)
}

// checkEntry checks key at a step: at most one row, in the partition of its
// expiry; and marked, claimed or absent as its model's expiry says.
func checkEntry(t *testing.T, c *serverClock, s *Store, table string, span time.Duration, step int,
	k dedupe.Key, claim bool, expires time.Time) {
	t.Helper()
	ctx := context.Background()
	live := expires.After(c.now(t))
	p := readPart(t, c, table, k)
	require.LessOrEqual(t, p.rows, 1, "step %d: rows of %s", step, k)
	if live {
		require.Equal(t, 1, p.rows, "step %d: live %s has no row", step, k)
	}
	if p.rows == 1 {
		require.Equal(t, wantPartition(c, table, p.expires, span), p.partition, "step %d: partition of %s expiring at %v", step, k, p.expires)
	}
	if live {
		require.WithinDuration(t, expires, p.expires, time.Minute, "step %d: expiry of %s", step, k)
	}
	ok, err := s.Exists(ctx, k)
	require.NoError(t, err, "step %d: Exists(%s)", step, k)
	require.Equal(t, live && !claim, ok, "step %d: Exists(%s); live %v, claim %v", step, k, live, claim)
	if !live {
		return // left alone, so that its row goes with its partition
	}
	_, st, err := claimNew(ctx, s, k, time.Minute)
	require.NoError(t, err, "step %d: Claim(%s) with the key live", step, k)
	require.NotEqual(t, dedupe.Claimed, st, "step %d: Claim(%s) with the key live", step, k)
}

// TestPartitionDropRace drops a partition of expired marks while eight
// writers mark, claim and release keys of later partitions, and again an
// hour later: the drop counts every expired row (the old marks, and the
// fences of released claims that expired before their key was marked again),
// and every mark a writer made is still there, in one row.
func TestPartitionDropRace(t *testing.T) {
	const span, old, writers = time.Hour, 200, 8
	c := newServerClock(t)
	pool := c.pool(t, 12)
	table := c.table(t)
	s := newTestStore(t, pool, Config{Table: table, Partitioned: true, PartitionSpan: span, TTL: 3 * time.Hour})
	ctx := context.Background()
	c.advance(t, c.now(t).Truncate(span).Add(span+5*time.Minute).Sub(c.now(t)))
	for i := range old {
		require.NoError(t, s.Mark(ctx, dedupe.Key{Channel: "old", MessageID: fmt.Sprint(i)}, 10*time.Minute))
	}

	var stop atomic.Bool
	var releases atomic.Int64
	marked := make([][]dedupe.Key, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; !stop.Load() && i < 400; i++ {
				k := dedupe.Key{Channel: "new", MessageID: fmt.Sprintf("%d-%d", w, i)}
				cl, st, err := claimNew(ctx, s, k, 3*time.Hour) // outlasting the clock's moves
				if !assert.NoError(t, err, "Claim(%s)", k) || !assert.Equal(t, dedupe.Claimed, st, "Claim(%s)", k) {
					return
				}
				if i%2 == 0 {
					if !assert.NoError(t, s.Release(ctx, cl), "Release(%s)", k) {
						return
					}
					releases.Add(1)
				}
				if !assert.NoError(t, s.Mark(ctx, k, 0), "Mark(%s)", k) {
					return
				}
				marked[w] = append(marked[w], k)
			}
		})
	}
	var dropped int64
	for range 2 {
		c.advance(t, span)
		n, err := s.CleanupExpired(ctx)
		require.NoError(t, err, "CleanupExpired")
		dropped += n
	}
	stop.Store(true)
	wg.Wait()
	// A released claim leaves a fence row for the store's lease (5 min): one
	// the clock's move expired before its key was marked again went with its
	// partition too.
	assert.GreaterOrEqual(t, dropped, int64(old), "rows the cleanup dropped: want the %d expired marks and at most %d expired fences", old, releases.Load())
	assert.LessOrEqual(t, dropped, old+releases.Load(), "rows the cleanup dropped: want the %d expired marks and at most %d expired fences", old, releases.Load())
	total := 0
	for _, ks := range marked {
		for _, k := range ks {
			ok, err := s.Exists(ctx, k)
			require.NoError(t, err, "Exists(%s) after the drops", k)
			require.True(t, ok, "Exists(%s) after the drops", k)
		}
		total += len(ks)
	}
	checkOneRowPerKey(t, table)
	t.Logf("%d marks made during 2 drops, all kept; %d expired rows dropped", total, dropped)
}

// TestPartitionsOnDemand moves the clock past the partitions created ahead,
// with no cleanup creating more: a Mark, a Claim, a DoTx and a Mark of a TTL
// of many spans each create the partitions they need and succeed, and each
// row is in the partition of its expiry.
func TestPartitionsOnDemand(t *testing.T) {
	const span = time.Hour
	c := newServerClock(t)
	pool := c.pool(t, 4)
	table := c.table(t)
	s := newTestStore(t, pool, Config{Table: table, Partitioned: true, PartitionSpan: span, TTL: time.Hour})
	ctx := context.Background()
	check := func(k dedupe.Key) {
		t.Helper()
		p := readPart(t, c, table, k)
		require.Equal(t, 1, p.rows, "%s: rows, in %s, expiring at %v", k, p.partition, p.expires)
		require.Equal(t, wantPartition(c, table, p.expires, span), p.partition, "%s: partition, expiring at %v", k, p.expires)
	}
	c.advance(t, 5*time.Hour)
	k := testKey(t, "demand")
	require.NoError(t, s.Mark(ctx, k, 0))
	check(k)
	c.advance(t, 5*time.Hour)
	k = testKey(t, "demand")
	_, st, err := claimNew(ctx, s, k, time.Minute)
	require.NoError(t, err, "Claim")
	require.Equal(t, dedupe.Claimed, st, "Claim")
	check(k)
	c.advance(t, 5*time.Hour)
	k = testKey(t, "demand")
	runs := 0
	require.NoError(t, s.DoTx(ctx, k, func(context.Context, pgx.Tx) error { runs++; return nil }), "DoTx")
	require.Equal(t, 1, runs, "runs of fn by DoTx")
	check(k)
	k = testKey(t, "demand")
	require.NoError(t, s.Mark(ctx, k, 30*time.Hour))
	check(k)
	ok, err := s.Exists(ctx, k)
	require.NoError(t, err, "Exists")
	require.True(t, ok, "Exists")
}

// TestPartitionDetachResumed interrupts a cleanup while its DETACH …
// CONCURRENTLY waits for a transaction still reading the table, which leaves
// the partition half detached, and leaves a detached partition undropped (as
// a process killed between DETACH and DROP would): the next cleanup finishes
// the one and drops both, counting their rows, and nothing live.
func TestPartitionDetachResumed(t *testing.T) {
	const span = time.Hour
	c := newServerClock(t)
	pool := c.pool(t, 4)
	table := c.table(t)
	s := newTestStore(t, pool, Config{Table: table, Partitioned: true, PartitionSpan: span, TTL: time.Hour})
	ctx := context.Background()
	for range 3 {
		require.NoError(t, s.Mark(ctx, testKey(t, "old"), 10*time.Minute))
	}
	c.advance(t, 2*span)
	live := testKey(t, "live")
	require.NoError(t, s.Mark(ctx, live, 0))
	// A detached partition left behind, of a range long past, holding a row.
	orphan := table + partSuffix + "200001010000"
	_, err := c.admin.Exec(ctx, `CREATE TABLE `+orphan+` (LIKE `+table+`);
INSERT INTO `+orphan+` VALUES ('orphan:1', NULL, '2000-01-01 00:30:00+00', NULL)`)
	require.NoError(t, err)

	reader, err := adminConn(t).Begin(ctx)
	require.NoError(t, err)
	_, err = reader.Exec(ctx, `SELECT count(*) FROM `+table)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	n1, err := s.CleanupExpired(short)
	cancel()
	require.Error(t, err, "CleanupExpired finished while a transaction read the partition it detaches")
	var pending int
	require.NoError(t, c.admin.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = $1::regclass AND inhdetachpending`,
		table).Scan(&pending))
	require.Equal(t, 1, pending, "partitions half detached after the interrupted cleanup (%v)", err)
	require.NoError(t, reader.Rollback(ctx))
	// The interrupted cleanup's connection may end after CleanupExpired
	// returned, holding the cleanup's lock until then: wait for it.
	_, err = c.admin.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0)), pg_advisory_unlock(hashtextextended($1, 0))`,
		s.part.dropLock())
	require.NoError(t, err)
	n2, err := s.CleanupExpired(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(4), n1+n2, "the cleanups dropped %d and %d rows, want the 3 expired marks and the orphan's row", n1, n2)
	var left bool
	require.NoError(t, c.admin.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, orphan).Scan(&left))
	require.False(t, left, "the detached partition is still there")
	ok, err := s.Exists(ctx, live)
	require.NoError(t, err, "Exists(live)")
	require.True(t, ok, "Exists(live)")
}

// TestCleanupLargePartition drops a partition of over 16 MB, whose rows
// CleanupExpired takes from the table statistics rather than counting them:
// the number it returns is within 1% of the rows dropped, and the live marks
// of the partitions kept are all there.
func TestCleanupLargePartition(t *testing.T) {
	const expired, live = 400_000, 1_000
	c := newServerClock(t)
	pool := c.pool(t, 4)
	cfg := Config{Table: c.table(t), Partitioned: true}
	s := newTestStore(t, pool, cfg)
	ctx := context.Background()
	ident := expiredDay(t, c, pool, s, cfg.Table, expired)
	var size int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(pg_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = $1::regclass`, ident.Sanitize()).Scan(&size))
	require.Greater(t, size, int64(exactCountBytes), "bytes of the largest partition: not over the %d counted exactly", exactCountBytes)
	keys := make([]dedupe.Key, live)
	for i := range keys {
		keys[i] = dedupe.Key{Channel: "live", MessageID: fmt.Sprint(i)}
		require.NoError(t, s.Mark(ctx, keys[i], time.Duration(i+1)*time.Minute))
	}
	n, err := s.CleanupExpired(ctx)
	require.NoError(t, err, "CleanupExpired")
	require.GreaterOrEqual(t, n, int64(expired*99/100), "CleanupExpired: want about the %d rows of the expired partition", expired)
	require.LessOrEqual(t, n, int64(expired*101/100), "CleanupExpired: want about the %d rows of the expired partition", expired)
	for _, k := range keys {
		ok, err := s.Exists(ctx, k)
		require.NoError(t, err, "Exists(%s) after the drop", k)
		require.True(t, ok, "Exists(%s) after the drop", k)
	}
	var rows int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+ident.Sanitize()).Scan(&rows))
	require.Equal(t, int64(live), rows, "rows left: want the %d live marks", live)
	t.Logf("CleanupExpired returned %d for the %d rows of a %d MB partition", n, expired, size>>20)
}
