package dedupe_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// newFlakyResults returns a flakyStore over a memory store, which keeps
// results.
func newFlakyResults() *flakyStore {
	return &flakyStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
}

// forgetful is a store that keeps no results, as the contract lets a store
// drop a result before its mark.
type forgetful struct{ dedupe.Store }

func (s forgetful) MarkResult(ctx context.Context, k dedupe.Key, _ []byte, ttl time.Duration) error {
	return s.Mark(ctx, k, ttl)
}

func reply(s string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) { return []byte(s), nil }
}

// A mark the store did not take is queued with its result: copies get the
// result from the queue, and the store gets it once it answers.
func TestDoResultQueuedMark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFlakyResults()
		d := dedupe.New(st)
		defer d.Close()
		ctx, k := context.Background(), key(1)
		st.marksFail.Store(true)
		res, err := d.DoResult(ctx, k, reply("answer"))
		require.Error(t, err, "the mark did not land within Do's wait")
		assert.Equal(t, "answer", string(res), "fn's own result")
		res, err = d.DoResult(ctx, k, reply("second run"))
		require.ErrorIs(t, err, dedupe.ErrDuplicate)
		assert.Equal(t, "answer", string(res), "the queued mark's result")

		st.marksFail.Store(false)
		require.NoError(t, d.Flush(ctx))
		got, marked, err := st.Store.Result(ctx, k)
		require.NoError(t, err)
		assert.True(t, marked)
		assert.Equal(t, "answer", string(got), "the store got the result with the queued mark")
	})
}

// A result over MaxResultSize is returned to the first caller; the key is
// marked without it and a warning says so.
func TestDoResultTooLarge(t *testing.T) {
	var logs bytes.Buffer
	d := dedupe.New(nil, dedupe.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	defer d.Close()
	big := bytes.Repeat([]byte("x"), dedupe.MaxResultSize+1)
	res, err := d.DoResult(context.Background(), key(1), func(context.Context) ([]byte, error) { return big, nil })
	require.NoError(t, err)
	assert.Len(t, res, len(big))
	res, err = d.DoResult(context.Background(), key(1), reply("never"))
	require.ErrorIs(t, err, dedupe.ErrDuplicate)
	assert.Nil(t, res)
	assert.Contains(t, logs.String(), "result not kept")
}

// A store that keeps no results marks and answers copies with no result.
func TestDoResultPlainStore(t *testing.T) {
	st := forgetful{dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
	d := dedupe.New(st)
	defer d.Close()
	_, err := d.DoResult(context.Background(), key(1), reply("answer"))
	require.NoError(t, err)
	res, err := d.DoResult(context.Background(), key(1), reply("never"))
	require.ErrorIs(t, err, dedupe.ErrDuplicate)
	assert.Nil(t, res)
}

// A failed run keeps nothing: the next copy runs, and its result is kept.
func TestDoResultFailure(t *testing.T) {
	d := dedupe.New(nil)
	defer d.Close()
	boom := errors.New("boom")
	res, err := d.DoResult(context.Background(), key(1), func(context.Context) ([]byte, error) { return []byte("partial"), boom })
	require.ErrorIs(t, err, boom)
	assert.Equal(t, "partial", string(res))
	res, err = d.DoResult(context.Background(), key(1), reply("retry"))
	require.NoError(t, err)
	assert.Equal(t, "retry", string(res))
	res, err = d.DoResult(context.Background(), key(1), reply("never"))
	require.ErrorIs(t, err, dedupe.ErrDuplicate)
	assert.Equal(t, "retry", string(res))
}

// While the primary is down, the fallback keeps results locally and hands
// them to copies; the primary gets them once it is back.
func TestDoResultFallback(t *testing.T) {
	primary := newFlakyResults()
	local := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	d := dedupe.New(primary, dedupe.WithFallback(local))
	defer d.Close()
	ctx := context.Background()
	primary.down.Store(true)
	res, err := d.DoResult(ctx, key(1), reply("offline answer"))
	require.NoError(t, err)
	assert.Equal(t, "offline answer", string(res))
	res, err = d.DoResult(ctx, key(1), reply("never"))
	require.ErrorIs(t, err, dedupe.ErrDuplicate)
	assert.Equal(t, "offline answer", string(res))

	primary.down.Store(false)
	require.NoError(t, d.Flush(ctx))
	got, _, err := primary.Store.Result(ctx, key(1))
	require.NoError(t, err)
	assert.Equal(t, "offline answer", string(got))
}

// Concurrent copies with a wait: fn runs once and every copy gets its
// result.
func TestDoResultConcurrentCopies(t *testing.T) {
	d := dedupe.New(nil, dedupe.WithWait(time.Minute))
	defer d.Close()
	var runs sync.WaitGroup
	results := make([]string, 16)
	n := 0
	var mu sync.Mutex
	for i := range results {
		runs.Add(1)
		go func() {
			defer runs.Done()
			res, err := d.DoResult(context.Background(), key(7), func(context.Context) ([]byte, error) {
				mu.Lock()
				n++
				mu.Unlock()
				return []byte("only answer"), nil
			})
			if err != nil && !errors.Is(err, dedupe.ErrDuplicate) {
				assert.NoError(t, err, "copy %d", i)
			}
			results[i] = string(res)
		}()
	}
	runs.Wait()
	assert.Equal(t, 1, n, "runs")
	for i, r := range results {
		assert.Equal(t, "only answer", r, "copy %d", i)
	}
}

// SQLite: a result goes with its mark when NekoBot (or a plain Mark)
// writes the key again, and CleanupExpired deletes expired results.
func TestSQLiteResultRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	clock := dedupetest.NewClock(sqliteT0)
	s := openSQLite(t, path, dedupe.SQLiteConfig{Now: clock.Now, Location: time.UTC})
	ctx := context.Background()
	db := rawDB(t, path)
	kept, rewritten := dedupe.Key{Channel: "slack", MessageID: "kept"}, dedupe.Key{Channel: "slack", MessageID: "nekobot"}
	require.NoError(t, s.MarkResult(ctx, kept, []byte("a"), time.Hour))
	require.NoError(t, s.MarkResult(ctx, rewritten, []byte("b"), time.Hour))
	// NekoBot marks the key again: its own upsert, with a new expiry.
	_, err := db.Exec("UPDATE gateway_dedupe SET expires_at = '2026-11-29 23:00:00' WHERE dedupe_key = 'slack:nekobot'")
	require.NoError(t, err)
	res, marked, err := s.Result(ctx, rewritten)
	require.NoError(t, err)
	assert.True(t, marked)
	assert.Nil(t, res, "a result does not outlive the mark it was written with")
	res, _, err = s.Result(ctx, kept)
	require.NoError(t, err)
	assert.Equal(t, "a", string(res))

	count := func() (n int) {
		require.NoError(t, db.QueryRow("SELECT count(*) FROM gateway_dedupe_results").Scan(&n))
		return n
	}
	assert.Equal(t, 2, count())
	clock.Advance(2 * time.Hour)
	_, err = s.CleanupExpired(ctx)
	require.NoError(t, err)
	assert.Zero(t, count(), "expired results are deleted")
}
