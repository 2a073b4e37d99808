package dedupehttp_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/queue"
)

// takeAndDie takes the next message of q and never settles it, as a worker
// killed mid-handler, then lets its visibility timeout run out.
func takeAndDie(t *testing.T, q queue.Queue, vis time.Duration) queue.Delivery {
	t.Helper()
	d, err := q.Take(t.Context())
	require.NoError(t, err)
	time.Sleep(vis) // in a synctest bubble: no time passes
	return d
}

// TestAsyncQueuePoisonStops: a message whose workers died on each of its
// attempts is failed, with the reason, on the next take, without running the
// handler again; a redelivery of it is processed.
func TestAsyncQueuePoisonStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const vis = 10 * time.Second
		q := queue.NewMemory(queue.MemoryConfig{Visibility: vis})
		defer q.Close()
		var runs atomic.Int32
		h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runs.Add(1) })
		done := make(chan ended, 2)
		// Accepted by an Async with no worker yet: its queue is taken by hand.
		_, _, err := q.Push(t.Context(), queue.Message{ID: "poison", Key: dedupe.Key{Channel: "telegram", MessageID: "1"},
			Method: http.MethodPost, Target: "/hook", Body: update(1)})
		require.NoError(t, err)
		for attempt := 1; attempt <= 3; attempt++ { // three workers killed by the message
			require.Equal(t, attempt, takeAndDie(t, q, vis).Attempt)
		}
		a := dedupehttp.NewAsync(dedupe.New(nil), telegram, h, dedupehttp.WithQueue(q),
			dedupehttp.WithMaxAttempts(3), dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(quiet))
		got := <-done
		assert.ErrorIs(t, got.err, dedupehttp.ErrAttemptsExhausted)
		synctest.Wait()
		assert.Zero(t, runs.Load(), "the fourth take does not run the handler")
		e, ok, err := q.Status(t.Context(), "poison")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, queue.StateFailed, e.State)
		assert.Equal(t, 4, e.Attempts)
		assert.Contains(t, e.Reason, "attempts exhausted")
		assert.Contains(t, e.Reason, "attempt 4 of at most 3")
		c, err := a.Queue().Count(t.Context())
		require.NoError(t, err)
		assert.Equal(t, queue.Counts{Live: 0, Failed: 1}, c)
		assert.EqualValues(t, 1, a.QueueStats().Failed)

		// Requeued by hand, it gets three attempts again: this time it runs.
		ok, err = a.Queue().Requeue(t.Context(), "poison")
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, (<-done).err)
		assert.EqualValues(t, 1, runs.Load())
		require.NoError(t, a.Close(t.Context()))
	})
}

// TestAsyncQueuePoisonMarkedIsDone: a message taken once more than allowed
// whose key is marked (its last worker processed it, then died before it
// settled it) is settled done, not failed.
func TestAsyncQueuePoisonMarkedIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const vis = 10 * time.Second
		q := queue.NewMemory(queue.MemoryConfig{Visibility: vis})
		defer q.Close()
		d := dedupe.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}))
		key := dedupe.Key{Channel: "telegram", MessageID: "1"}
		_, _, err := q.Push(t.Context(), queue.Message{ID: "m", Key: key, Method: http.MethodPost, Target: "/hook", Body: update(1)})
		require.NoError(t, err)
		takeAndDie(t, q, vis)
		require.NoError(t, d.Do(t.Context(), key, func(context.Context) error { return nil }))
		done := make(chan ended, 1)
		a := dedupehttp.NewAsync(d, telegram, http.NotFoundHandler(), dedupehttp.WithQueue(q),
			dedupehttp.WithMaxAttempts(1), dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(quiet))
		assert.ErrorIs(t, (<-done).err, dedupe.ErrDuplicate)
		synctest.Wait()
		e, _, err := q.Status(t.Context(), "m")
		require.NoError(t, err)
		assert.Equal(t, queue.StateDone, e.State)
		require.NoError(t, a.Close(t.Context()))
		assert.EqualValues(t, 1, a.QueueStats().Duplicate)
	})
}

// TestAsyncQueueInFlightDoesNotCount: takes that find the key claimed
// elsewhere are given back and do not use up the attempts.
func TestAsyncQueueInFlightDoesNotCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.NewMemory(queue.MemoryConfig{Visibility: 4 * time.Second})
		defer q.Close()
		store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		d := dedupe.New(store, dedupe.WithLease(time.Minute))
		key := dedupe.Key{Channel: "telegram", MessageID: "1"}
		_, err := store.Claim(t.Context(), dedupe.NewClaim(key), time.Minute) // a dead worker's claim, for a minute
		require.NoError(t, err)
		done := make(chan ended, 1)
		a := dedupehttp.NewAsync(d, telegram, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
			dedupehttp.WithQueue(q), dedupehttp.WithMaxAttempts(1), dedupehttp.WithDone(doneTo(done)),
			dedupehttp.WithLogger(quiet))
		w := record(a, t.Context(), update(1))
		require.Equal(t, http.StatusAccepted, w.Code)
		require.NoError(t, (<-done).err, "run once the dead worker's claim ran out")
		synctest.Wait()
		_, st := statusOf(t, a, w.Header().Get(dedupehttp.HeaderQueueID))
		assert.Equal(t, "done", st["state"])
		assert.EqualValues(t, 1, st["attempts"], "only the take that ran counts")
		assert.Greater(t, a.QueueStats().Retried, uint64(10), "put back while the claim held")
		require.NoError(t, a.Close(t.Context()))
	})
}

// TestAsyncQueueHandlerTimeout: a handler that runs past its deadline has
// its context cancelled with ErrHandlerTimeout and fails the attempt; by
// default the deadline is nine tenths of the visibility timeout.
func TestAsyncQueueHandlerTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  dedupehttp.AsyncOption
		want time.Duration
	}{
		{"option", dedupehttp.WithHandlerTimeout(5 * time.Second), 5 * time.Second},
		{"default", dedupehttp.WithHandlerTimeout(0), 9 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := queue.NewMemory(queue.MemoryConfig{Visibility: 10 * time.Second})
				defer q.Close()
				causes := make(chan error, 1)
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					<-r.Context().Done() // hangs until its deadline
					causes <- context.Cause(r.Context())
				})
				done := make(chan ended, 1)
				a := dedupehttp.NewAsync(dedupe.New(nil), telegram, h, dedupehttp.WithQueue(q), tc.opt,
					dedupehttp.WithMaxAttempts(1), dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(quiet))
				start := time.Now()
				w := record(a, t.Context(), update(1))
				require.Equal(t, http.StatusAccepted, w.Code)
				err := (<-done).err
				assert.Equal(t, tc.want, time.Since(start))
				assert.ErrorIs(t, <-causes, dedupehttp.ErrHandlerTimeout)
				assert.ErrorIs(t, err, dedupehttp.ErrHandlerTimeout)
				assert.ErrorIs(t, err, dedupehttp.ErrHandlerFailed)
				synctest.Wait()
				_, st := statusOf(t, a, w.Header().Get(dedupehttp.HeaderQueueID))
				assert.Equal(t, "failed", st["state"])
				assert.Contains(t, st["reason"], "handler timed out")
				require.NoError(t, a.Close(t.Context()))
			})
		})
	}
}

// TestAsyncQueueDepthBound: a queue at its depth bound refuses a new
// message with 503 and Retry-After; a copy of a queued one is still
// answered as in flight, and room is made as messages are processed.
func TestAsyncQueueDepthBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.NewMemory(queue.MemoryConfig{MaxDepth: 2})
		defer q.Close()
		gate := make(chan struct{})
		h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-gate })
		a := dedupehttp.NewAsync(dedupe.New(nil), telegram, h, dedupehttp.WithQueue(q),
			dedupehttp.WithWorkers(1), dedupehttp.WithLogger(quiet))
		for i := 1; i <= 2; i++ {
			require.Equal(t, http.StatusAccepted, record(a, t.Context(), update(i)).Code)
		}
		full := record(a, t.Context(), update(3))
		assert.Equal(t, http.StatusServiceUnavailable, full.Code)
		assert.Equal(t, "unavailable", full.Header().Get(dedupehttp.HeaderVerdict))
		assert.NotEmpty(t, full.Header().Get("Retry-After"))
		assert.Contains(t, full.Body.String(), "queue full")
		assert.Equal(t, http.StatusServiceUnavailable, record(a, t.Context(), update(2)).Code, "a copy in flight")
		assert.EqualValues(t, 1, a.QueueStats().Full)
		close(gate)
		synctest.Wait()
		assert.Equal(t, http.StatusAccepted, record(a, t.Context(), update(3)).Code, "room again")
		require.NoError(t, a.Close(t.Context()))
	})
}

// TestAsyncSQLiteQueueDepthBound: a flood against a durable queue with a
// depth bound is accepted up to the bound and refused beyond it with 503
// and Retry-After, never silently; without the bound every request was
// accepted.
func TestAsyncSQLiteQueueDepthBound(t *testing.T) {
	const flood, bound = 1000, 100
	q, err := queue.OpenSQLite(filepath.Join(t.TempDir(), "queue.db"), queue.SQLiteConfig{MaxDepth: bound})
	require.NoError(t, err)
	defer q.Close()
	gate := make(chan struct{})
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-gate })
	a := dedupehttp.NewAsync(dedupe.New(nil), telegram, h, dedupehttp.WithQueue(q),
		dedupehttp.WithWorkers(1), dedupehttp.WithLogger(quiet))
	var accepted, refused int
	for i := 1; i <= flood; i++ {
		w := record(a, t.Context(), update(i))
		switch w.Code {
		case http.StatusAccepted:
			accepted++
		case http.StatusServiceUnavailable:
			require.NotEmpty(t, w.Header().Get("Retry-After"))
			refused++
		default:
			require.Failf(t, "unexpected status", "request %d: status %d", i, w.Code)
		}
	}
	t.Logf("%d requests, queue bound %d: %d accepted, %d refused with 503", flood, bound, accepted, refused)
	assert.Equal(t, bound, accepted)
	assert.Equal(t, flood-bound, refused)
	assert.EqualValues(t, flood-bound, a.QueueStats().Full)
	close(gate)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, a.Close(ctx))
}

// TestAsyncQueueHandlerIgnoresDeadline: a handler that ignores its
// cancelled context keeps its worker until it returns (Go cannot stop it);
// it is logged at error level one second past its deadline, and its attempt
// has failed.
func TestAsyncQueueHandlerIgnoresDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.NewMemory(queue.MemoryConfig{})
		defer q.Close()
		logs := &logBuffer{}
		h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(5 * time.Second) })
		done := make(chan ended, 1)
		a := dedupehttp.NewAsync(dedupe.New(nil), telegram, h, dedupehttp.WithQueue(q),
			dedupehttp.WithHandlerTimeout(time.Second), dedupehttp.WithMaxAttempts(1),
			dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(logs.logger()))
		start := time.Now()
		require.Equal(t, http.StatusAccepted, record(a, t.Context(), update(1)).Code)
		err := (<-done).err
		assert.Equal(t, 5*time.Second, time.Since(start), "the worker waited for the handler")
		assert.ErrorIs(t, err, dedupehttp.ErrHandlerTimeout)
		var overdue int
		for _, rec := range logs.records(t) {
			if strings.Contains(rec["msg"].(string), "ignores its deadline") {
				overdue++
				assert.Equal(t, "ERROR", rec["level"])
			}
		}
		assert.Equal(t, 1, overdue)
		require.NoError(t, a.Close(t.Context()))
	})
}
