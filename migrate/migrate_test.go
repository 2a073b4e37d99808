package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/migrate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clock is a settable clock for stores and copies.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

var start = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newMemory(t *testing.T, c *clock) *dedupe.MemoryStore {
	t.Helper()
	s := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 1 << 20, Now: c.Now})
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newSQLite(t *testing.T, c *clock) *dedupe.SQLiteStore {
	t.Helper()
	s, err := dedupe.OpenSQLite(filepath.Join(t.TempDir(), "marks.db"), dedupe.SQLiteConfig{Now: c.Now, Location: time.UTC})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// expiries returns every mark of s by key, walking it with its dedupe.Lister.
func expiries(t *testing.T, s dedupe.Lister) map[dedupe.Key]time.Time {
	t.Helper()
	got := map[dedupe.Key]time.Time{}
	cursor := ""
	for {
		next, err := s.ListMarks(context.Background(), cursor, 7, func(k dedupe.Key, exp time.Time) {
			_, dup := got[k]
			assert.False(t, dup, "%s listed twice", k)
			got[k] = exp
		})
		require.NoError(t, err)
		if next == "" {
			return got
		}
		cursor = next
	}
}

func key(i int) dedupe.Key { return dedupe.Key{Channel: "telegram", MessageID: fmt.Sprint(i)} }

// A copy from memory to SQLite writes every live mark with its expiry,
// skips expired marks and claims, counts the marks the destination held
// (keeping a longer expiry there and lengthening a shorter one), and walks the
// source in pages of any size.
func TestCopyMemoryToSQLite(t *testing.T) {
	ctx := context.Background()
	c := newClock(start)
	from, to := newMemory(t, c), newSQLite(t, c)
	const n = 250
	for i := range n {
		ttl := time.Duration(i+1) * time.Minute
		if i%10 == 0 {
			ttl = time.Second // expired by the copy
		}
		require.NoError(t, from.Mark(ctx, key(i), ttl))
	}
	st, err := from.Claim(ctx, dedupe.NewClaim(dedupe.Key{Channel: "qq", MessageID: "claimed"}), 0)
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, st)
	// Present at the destination: key(1) for longer than the source's, key(2) shorter.
	require.NoError(t, to.Mark(ctx, key(1), 10*time.Hour))
	require.NoError(t, to.Mark(ctx, key(2), time.Minute))
	c.Advance(2 * time.Second)

	sum, err := migrate.Copy(ctx, from, to, migrate.Options{Batch: 16, Now: c.Now})
	require.NoError(t, err)
	want := migrate.Summary{Listed: n, Copied: n - n/10 - 2, Present: 2, Expired: n / 10}
	require.Equal(t, want, sum)
	got := expiries(t, to)
	for i := range n {
		exp, ok := got[key(i)]
		wantExp := start.Add(time.Duration(i+1) * time.Minute)
		switch {
		case i == 1:
			wantExp = start.Add(10 * time.Hour)
		case i%10 == 0:
			assert.False(t, ok, "expired %s copied", key(i))
			continue
		}
		assert.True(t, ok && exp.Equal(wantExp), "%s: expiry %v (present %v), want %v", key(i), exp, ok, wantExp)
	}
	ok, _ := to.Exists(ctx, dedupe.Key{Channel: "qq", MessageID: "claimed"})
	assert.False(t, ok, "a claim was copied as a mark")
}

// NekoBot's own file (written by its Python code) copies to memory with
// NekoBot's semantics: at 20:30:00 four marks are live and two expired, and
// "web:a:b:c" keeps its text form.
func TestCopyNekoBotFile(t *testing.T) {
	src := filepath.Join("..", "..", "shared", "testdata", "nekobot", "gateway.db")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("NekoBot fixture not found: %v", err)
	}
	path := filepath.Join(t.TempDir(), "gateway.db")
	copyFile(t, src, path)
	c := newClock(time.Date(2026, 11, 29, 20, 30, 0, 0, time.UTC))
	from, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{Now: c.Now, Location: time.UTC})
	require.NoError(t, err)
	defer from.Close()
	to := newMemory(t, c)
	sum, err := migrate.Copy(context.Background(), from, to, migrate.Options{Batch: 4, Now: c.Now})
	require.NoError(t, err)
	require.Equal(t, migrate.Summary{Listed: 6, Copied: 4, Expired: 2}, sum)
	got := expiries(t, to)
	web := dedupe.Key{Channel: "web", MessageID: "a:b:c"}
	exp := got[web]
	assert.True(t, exp.Equal(time.Date(2026, 11, 29, 22, 28, 32, 897612000, time.UTC)), "%s expires %v", web, exp)
	st, err := migrate.Stats(context.Background(), from)
	require.NoError(t, err)
	assert.Equal(t, int64(4), st.Marks, "stats of the NekoBot file: %+v", st)
	assert.Zero(t, st.Claims, "stats of the NekoBot file: %+v", st)
	assert.NotZero(t, st.Sizes["file"], "stats of the NekoBot file: %+v", st)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.Create(to)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// A copy stopped after a committed batch resumes from its checkpoint: every
// mark arrives once, the marks of the batch written again count as present,
// and the counts of the two runs add up to the source's marks.
func TestCopyResume(t *testing.T) {
	ctx := context.Background()
	c := newClock(start)
	from, to := newMemory(t, c), newSQLite(t, c)
	const n = 100
	for i := range n {
		require.NoError(t, from.Mark(ctx, key(i), time.Hour))
	}
	var last migrate.Checkpoint
	stop := errors.New("stop")
	calls := 0
	_, err := migrate.Copy(ctx, from, to, migrate.Options{Batch: 10, Now: c.Now, Checkpoint: func(cp migrate.Checkpoint) error {
		if calls++; calls == 4 {
			return stop // the 4th batch is written but not checkpointed
		}
		last = cp
		return nil
	}})
	require.ErrorIs(t, err, stop, "first run")
	require.Equal(t, int64(30), last.Summary.Copied, "checkpoint %+v", last)
	require.False(t, last.Done, "checkpoint %+v", last)
	var final migrate.Checkpoint
	sum, err := migrate.Copy(ctx, from, to, migrate.Options{Batch: 10, Now: c.Now, Resume: &last,
		Checkpoint: func(cp migrate.Checkpoint) error { final = cp; return nil }})
	require.NoError(t, err)
	want := migrate.Summary{Listed: n, Copied: n - 10, Present: 10}
	require.Equal(t, want, sum, "final checkpoint %+v", final)
	require.True(t, final.Done, "final checkpoint %+v", final)
	require.Equal(t, want, final.Summary, "final checkpoint")
	require.Len(t, expiries(t, to), n, "marks at the destination")
	// A finished copy resumed does nothing more.
	again, err := migrate.Copy(ctx, from, to, migrate.Options{Resume: &final})
	require.NoError(t, err, "resumed after done")
	require.Equal(t, sum, again, "resumed after done")
}

// A dry run writes nothing and counts what it would do, asking the
// destination which keys it holds.
func TestCopyDryRun(t *testing.T) {
	ctx := context.Background()
	c := newClock(start)
	from, to := newMemory(t, c), newMemory(t, c)
	for i := range 20 {
		require.NoError(t, from.Mark(ctx, key(i), time.Hour))
	}
	require.NoError(t, to.Mark(ctx, key(3), time.Hour))
	sum, err := migrate.Copy(ctx, from, to, migrate.Options{DryRun: true, Batch: 3, Now: c.Now})
	require.NoError(t, err)
	require.Equal(t, migrate.Summary{Listed: 20, Copied: 19, Present: 1}, sum)
	require.Equal(t, 1, to.Len(), "a dry run wrote marks at the destination")
}

// Keys a store cannot hold, and marks that never expire, from a SQLite file
// written by another program: the first are skipped and counted, the second
// copied with NoExpiryTTL.
func TestCopyInvalidAndForever(t *testing.T) {
	ctx := context.Background()
	c := newClock(start)
	path := filepath.Join(t.TempDir(), "gateway.db")
	from, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{Now: c.Now, Location: time.UTC})
	require.NoError(t, err)
	defer from.Close()
	db := openRaw(t, path)
	_, err = db.Exec(`INSERT INTO gateway_dedupe (dedupe_key, channel_id, message_id, created_at, expires_at) VALUES
		('nocolon', 'x', 'y', '2026-12-01T00:00:00', '2027-01-01T00:00:00'),
		('qq:forever', 'qq', 'forever', '2026-12-01T00:00:00', NULL),
		('qq:garbled', 'qq', 'garbled', '2026-12-01T00:00:00', 'soon')`)
	require.NoError(t, err)
	to := newMemory(t, c)
	sum, err := migrate.Copy(ctx, from, to, migrate.Options{Now: c.Now, NoExpiryTTL: 3 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, migrate.Summary{Listed: 3, Copied: 2, Invalid: 1}, sum)
	got := expiries(t, to)
	for _, id := range []string{"forever", "garbled"} {
		exp := got[dedupe.Key{Channel: "qq", MessageID: id}]
		assert.True(t, exp.Equal(start.Add(3*time.Hour)), "qq:%s expires %v", id, exp)
	}
}

// Stats counts live marks and claims and their expiries on both stores of
// the root module.
func TestStats(t *testing.T) {
	ctx := context.Background()
	c := newClock(start)
	for _, s := range []dedupe.Store{newMemory(t, c), newSQLite(t, c)} {
		require.NoError(t, s.Mark(ctx, key(1), time.Minute))
		require.NoError(t, s.Mark(ctx, key(2), time.Hour))
		require.NoError(t, s.Mark(ctx, key(3), time.Second))
		_, err := s.Claim(ctx, dedupe.NewClaim(key(4)), time.Minute)
		require.NoError(t, err)
		c.Advance(2 * time.Second)
		st, err := migrate.Stats(ctx, s)
		require.NoError(t, err)
		assert.Equal(t, int64(2), st.Marks, "%s: %+v", s.Backend(), st)
		assert.Equal(t, int64(1), st.Claims, "%s: %+v", s.Backend(), st)
		assert.True(t, st.Oldest.Equal(start.Add(time.Minute)), "%s: %+v", s.Backend(), st)
		assert.True(t, st.Newest.Equal(start.Add(time.Hour)), "%s: %+v", s.Backend(), st)
		c.ns.Store(start.UnixNano())
	}
}

// twice is a store whose walk yields every mark twice in a page, as a SCAN
// may.
type twice struct{ *dedupe.MemoryStore }

func (s twice) ListMarks(ctx context.Context, cursor string, limit int, yield func(dedupe.Key, time.Time)) (string, error) {
	return s.MemoryStore.ListMarks(ctx, cursor, limit, func(k dedupe.Key, exp time.Time) {
		yield(k, exp)
		yield(k, exp.Add(-time.Minute))
	})
}

// A key listed twice is written once, with its later expiry, and its
// second listing counts as present, so that the counts still add up.
func TestCopyRepeatedKeys(t *testing.T) {
	ctx := context.Background()
	c := newClock(start)
	from, to := newMemory(t, c), newMemory(t, c)
	for i := range 10 {
		require.NoError(t, from.Mark(ctx, key(i), time.Hour))
	}
	sum, err := migrate.Copy(ctx, twice{from}, to, migrate.Options{Batch: 4, Now: c.Now})
	require.NoError(t, err)
	require.Equal(t, migrate.Summary{Listed: 20, Copied: 10, Present: 10}, sum)
	for k, exp := range expiries(t, to) {
		assert.True(t, exp.Equal(start.Add(time.Hour)), "%s expires %v", k, exp)
	}
}
