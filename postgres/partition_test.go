package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return s
		},
	})
	checkOneRowPerKey(t, table)
}

// checkOneRowPerKey fails t if a key has more than one row in table.
func checkOneRowPerKey(t *testing.T, table string) {
	t.Helper()
	var keys, dups int
	if err := adminConn(t).QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE n > 1)
FROM (SELECT count(*) AS n FROM `+table+` GROUP BY key) k`).Scan(&keys, &dups); err != nil {
		t.Fatal(err)
	}
	if dups != 0 {
		t.Fatalf("%d of %d keys have more than one row", dups, keys)
	}
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
	if err != nil && !isNoRows(err) {
		t.Fatal(err)
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
		if err := s.MarkResult(ctx, e.key, []byte(ttl.String()), ttl); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	for _, lease := range []time.Duration{15 * time.Minute, 70 * time.Minute} {
		cl, st, err := claimNew(ctx, s, testKey(t, "claim"), lease)
		if err != nil || st != dedupe.Claimed {
			t.Fatalf("Claim = %v, %v", st, err)
		}
		entries = append(entries, &entry{key: cl.Key, claim: &cl, expires: c.now(t).Add(lease)})
	}
	moving := &entry{key: testKey(t, "moving")}
	entries = append(entries, moving)

	var dropped int64
	for step := range 12 {
		now := c.now(t)
		// The key marked again at every step hops to a later partition.
		if err := s.Mark(ctx, moving.key, 95*time.Minute); err != nil {
			t.Fatal(err)
		}
		moving.expires = now.Add(95 * time.Minute)
		// The long claim's holder extends it across the next boundary.
		if cl := entries[len(entries)-2]; cl.expires.After(now) && step < 6 {
			if err := s.Extend(ctx, *cl.claim, 70*time.Minute); err != nil {
				t.Fatalf("step %d: Extend: %v", step, err)
			}
			cl.expires = now.Add(70 * time.Minute)
		}
		for _, e := range entries {
			checkEntry(t, c, s, table, span, step, e.key, e.claim != nil, e.expires)
		}
		n, err := s.CleanupExpired(ctx)
		if err != nil {
			t.Fatalf("step %d: CleanupExpired: %v", step, err)
		}
		dropped += n
		for _, e := range entries { // the cleanup took nothing live
			checkEntry(t, c, s, table, span, step, e.key, e.claim != nil, e.expires)
		}
		c.advance(t, 25*time.Minute)
	}
	if dropped == 0 {
		t.Fatal("no row was dropped with its partition")
	}
	var parts int
	if err := c.admin.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = $1::regclass`, table).Scan(&parts); err != nil {
		t.Fatal(err)
	}
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
	switch {
	case p.rows > 1:
		t.Fatalf("step %d: %s has %d rows", step, k, p.rows)
	case live && p.rows != 1:
		t.Fatalf("step %d: live %s has no row", step, k)
	case p.rows == 1 && p.partition != wantPartition(c, table, p.expires, span):
		t.Fatalf("step %d: %s expiring at %v is in %s, want %s", step, k, p.expires, p.partition, wantPartition(c, table, p.expires, span))
	case live && p.expires.Sub(expires).Abs() > time.Minute:
		t.Fatalf("step %d: %s expires at %v, want %v", step, k, p.expires, expires)
	}
	ok, err := s.Exists(ctx, k)
	if err != nil || ok != (live && !claim) {
		t.Fatalf("step %d: Exists(%s) = %v, %v; live %v, claim %v", step, k, ok, err, live, claim)
	}
	if !live {
		return // left alone, so that its row goes with its partition
	}
	if _, st, err := claimNew(ctx, s, k, time.Minute); err != nil || st == dedupe.Claimed {
		t.Fatalf("step %d: Claim(%s) = %v, %v with the key live", step, k, st, err)
	}
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
		if err := s.Mark(ctx, dedupe.Key{Channel: "old", MessageID: fmt.Sprint(i)}, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
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
				if err != nil || st != dedupe.Claimed {
					t.Errorf("Claim(%s) = %v, %v", k, st, err)
					return
				}
				if i%2 == 0 {
					if err := s.Release(ctx, cl); err != nil {
						t.Errorf("Release(%s): %v", k, err)
						return
					}
					releases.Add(1)
				}
				if err := s.Mark(ctx, k, 0); err != nil {
					t.Errorf("Mark(%s): %v", k, err)
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
		if err != nil {
			t.Fatalf("CleanupExpired: %v", err)
		}
		dropped += n
	}
	stop.Store(true)
	wg.Wait()
	// A released claim leaves a fence row for the store's lease (5 min): one
	// the clock's move expired before its key was marked again went with its
	// partition too.
	if dropped < old || dropped > old+releases.Load() {
		t.Errorf("the cleanup dropped %d rows, want the %d expired marks and at most %d expired fences", dropped, old, releases.Load())
	}
	total := 0
	for _, ks := range marked {
		for _, k := range ks {
			if ok, err := s.Exists(ctx, k); err != nil || !ok {
				t.Fatalf("Exists(%s) after the drops = %v, %v", k, ok, err)
			}
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
		if p.rows != 1 || p.partition != wantPartition(c, table, p.expires, span) {
			t.Fatalf("%s: %d rows, in %s, expiring at %v", k, p.rows, p.partition, p.expires)
		}
	}
	c.advance(t, 5*time.Hour)
	k := testKey(t, "demand")
	if err := s.Mark(ctx, k, 0); err != nil {
		t.Fatal(err)
	}
	check(k)
	c.advance(t, 5*time.Hour)
	k = testKey(t, "demand")
	if _, st, err := claimNew(ctx, s, k, time.Minute); err != nil || st != dedupe.Claimed {
		t.Fatalf("Claim = %v, %v", st, err)
	}
	check(k)
	c.advance(t, 5*time.Hour)
	k = testKey(t, "demand")
	runs := 0
	if err := s.DoTx(ctx, k, func(context.Context, pgx.Tx) error { runs++; return nil }); err != nil || runs != 1 {
		t.Fatalf("DoTx = %v after %d runs of fn", err, runs)
	}
	check(k)
	k = testKey(t, "demand")
	if err := s.Mark(ctx, k, 30*time.Hour); err != nil {
		t.Fatal(err)
	}
	check(k)
	if ok, err := s.Exists(ctx, k); err != nil || !ok {
		t.Fatalf("Exists = %v, %v", ok, err)
	}
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
		if err := s.Mark(ctx, testKey(t, "old"), 10*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	c.advance(t, 2*span)
	live := testKey(t, "live")
	if err := s.Mark(ctx, live, 0); err != nil {
		t.Fatal(err)
	}
	// A detached partition left behind, of a range long past, holding a row.
	orphan := table + partSuffix + "200001010000"
	if _, err := c.admin.Exec(ctx, `CREATE TABLE `+orphan+` (LIKE `+table+`);
INSERT INTO `+orphan+` VALUES ('orphan:1', NULL, '2000-01-01 00:30:00+00', NULL)`); err != nil {
		t.Fatal(err)
	}

	reader, err := adminConn(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Exec(ctx, `SELECT count(*) FROM `+table); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	n1, err := s.CleanupExpired(short)
	cancel()
	if err == nil {
		t.Fatal("CleanupExpired finished while a transaction read the partition it detaches")
	}
	var pending int
	if err := c.admin.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = $1::regclass AND inhdetachpending`,
		table).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 1 {
		t.Fatalf("%d partitions half detached after the interrupted cleanup (%v), want 1", pending, err)
	}
	if err := reader.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The interrupted cleanup's connection may end after CleanupExpired
	// returned, holding the cleanup's lock until then: wait for it.
	if _, err := c.admin.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0)), pg_advisory_unlock(hashtextextended($1, 0))`,
		s.part.dropLock()); err != nil {
		t.Fatal(err)
	}
	n2, err := s.CleanupExpired(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n1+n2 != 4 {
		t.Fatalf("the cleanups dropped %d and %d rows, want the 3 expired marks and the orphan's row", n1, n2)
	}
	var left bool
	if err := c.admin.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, orphan).Scan(&left); err != nil || left {
		t.Fatalf("the detached partition is still there (%v)", err)
	}
	if ok, err := s.Exists(ctx, live); err != nil || !ok {
		t.Fatalf("Exists(live) = %v, %v", ok, err)
	}
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
	if err := pool.QueryRow(ctx, `SELECT max(pg_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = $1::regclass`, ident.Sanitize()).Scan(&size); err != nil {
		t.Fatal(err)
	}
	if size <= exactCountBytes {
		t.Fatalf("the largest partition is %d bytes, not over the %d counted exactly", size, exactCountBytes)
	}
	keys := make([]dedupe.Key, live)
	for i := range keys {
		keys[i] = dedupe.Key{Channel: "live", MessageID: fmt.Sprint(i)}
		if err := s.Mark(ctx, keys[i], time.Duration(i+1)*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.CleanupExpired(ctx)
	if err != nil || n < expired*99/100 || n > expired*101/100 {
		t.Fatalf("CleanupExpired = %d, %v; want about the %d rows of the expired partition", n, err, expired)
	}
	for _, k := range keys {
		if ok, err := s.Exists(ctx, k); err != nil || !ok {
			t.Fatalf("Exists(%s) after the drop = %v, %v", k, ok, err)
		}
	}
	var rows int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+ident.Sanitize()).Scan(&rows); err != nil || rows != live {
		t.Fatalf("%d rows left, %v; want the %d live marks", rows, err, live)
	}
	t.Logf("CleanupExpired returned %d for the %d rows of a %d MB partition", n, expired, size>>20)
}
