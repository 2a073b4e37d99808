package dedupehttp_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/queue"
	replies "github.com/gatewaykit/dedupe/reply"
)

// A reply held by another sender (one that died holding its lock) is
// answered to the platform as in flight: the middleware's in-flight answer
// (503, Retry-After, verdict in_flight), the message's claim released, no
// warning; once the lock is free, the platform's next delivery runs the
// handler and sends the reply. Before AnswerInFlight, a handler could only
// fail: 500 and a "handler failed" warning per delivery.
func TestAnswerInFlightReplyHeld(t *testing.T) {
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	defer store.Close()
	d := dedupe.New(store)
	sender := replies.New(store, replies.Telegram)
	var sent int
	send := func(context.Context, replies.Message) (string, error) { sent++; return "m1", nil }
	var logs logBuffer
	h := dedupehttp.New(d, platform.Telegram, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, _ := dedupehttp.KeyFrom(r.Context())
		compose := func(context.Context) ([]byte, error) { return []byte("answer"), nil }
		_, err := sender.Send(r.Context(), key, 0, compose, send)
		switch {
		case errors.Is(err, dedupe.ErrInFlight):
			dedupehttp.AnswerInFlight(w, r)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}), dedupehttp.WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))

	built := len(logs.records(t)) // the warning that the endpoint is unauthenticated

	// A sender that died holding the lock of the reply of update 77.
	lock := dedupe.NewClaim(dedupe.Key{Channel: "dedupe.reply-lock", MessageID: "telegram:77#0"})
	st, err := store.Claim(context.Background(), lock, time.Minute)
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, st)

	for range 3 {
		rec := deliver(h, update(77), nil)
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "the platform's deliveries while the reply is held")
		assert.Equal(t, "in_flight", rec.Header().Get(dedupehttp.HeaderVerdict))
		assert.NotEmpty(t, rec.Header().Get("Retry-After"))
	}
	assert.Len(t, logs.records(t), built, "nothing logged at info or above: %v", logs.records(t))
	assert.Zero(t, sent)

	require.NoError(t, store.Release(context.Background(), lock)) // the lock's lease ran out
	rec := deliver(h, update(77), nil)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, 1, sent)
	assert.Equal(t, http.StatusOK, deliver(h, update(77), nil).Code, "a duplicate")
	assert.Equal(t, 1, sent)
}

// Under Async with a queue, a handler that answers in flight puts its
// message back, after half the visibility timeout, without counting an
// attempt or warning: with WithMaxAttempts(1), five such answers and then a
// success leave the message done, not failed.
func TestAnswerInFlightQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.NewMemory(queue.MemoryConfig{Visibility: 10 * time.Second})
		defer q.Close()
		var calls atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) <= 5 {
				dedupehttp.AnswerInFlight(w, r)
			}
		})
		var logs logBuffer
		done := make(chan ended, 1)
		a := dedupehttp.NewAsync(dedupe.New(nil), telegram, h, dedupehttp.WithQueue(q), dedupehttp.WithMaxAttempts(1),
			dedupehttp.WithDone(doneTo(done)),
			dedupehttp.WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
		built := len(logs.records(t))
		start := time.Now()
		w := record(a, t.Context(), update(1))
		require.Equal(t, http.StatusAccepted, w.Code)
		require.NoError(t, (<-done).err)
		assert.Equal(t, 25*time.Second, time.Since(start), "put back five times, 5 s each")
		assert.EqualValues(t, 6, calls.Load())
		synctest.Wait()
		_, st := statusOf(t, a, w.Header().Get(dedupehttp.HeaderQueueID))
		assert.Equal(t, "done", st["state"])
		require.NoError(t, a.Close(t.Context()))
		s := a.QueueStats()
		assert.Equal(t, [3]uint64{1, 5, 0}, [3]uint64{s.Success, s.Retried, s.Failed})
		assert.Len(t, logs.records(t), built, "nothing logged at info or above: %v", logs.records(t))
	})
}
