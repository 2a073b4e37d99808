package dedupehttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gatewaykit/dedupe/queue"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
)

// statusOf asks a's status handler for queue id id.
func statusOf(t *testing.T, a *dedupehttp.Async, id string) (int, map[string]any) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /queue/{id}", a.StatusHandler())
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/queue/"+id, nil))
	var body map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	return w.Code, body
}

func TestAsyncQueueAcceptsThenProcesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.NewMemory(queue.MemoryConfig{})
		defer q.Close()
		d := dedupe.New(nil)
		gate := make(chan struct{})
		type seen struct {
			body, queueID, trace, method, target, host string
			header                                     http.Header
			key                                        dedupe.Key
			verdict                                    dedupehttp.Verdict
		}
		got := make(chan seen, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-gate
			b, _ := io.ReadAll(r.Body)
			k, v := dedupehttp.KeyFrom(r.Context())
			got <- seen{string(b), dedupehttp.QueueID(r.Context()), dedupe.TraceID(r.Context()),
				r.Method, r.RequestURI, r.Host, r.Header, k, v}
		})
		done := make(chan ended, 1)
		a := dedupehttp.NewAsync(d, telegram, h, dedupehttp.WithQueue(q), dedupehttp.WithDone(doneTo(done)),
			dedupehttp.WithLogger(quiet))
		srv := withTrace("trace-9", a)

		r := httptest.NewRequest(http.MethodPost, "/hook/tg?bot=1", strings.NewReader(string(update(10))))
		r.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret")
		r.Header.Set("Authorization", "Bearer x")
		r.Header.Set("X-Custom", "kept")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		require.Equal(t, http.StatusAccepted, w.Code)
		assert.Equal(t, "queued", w.Header().Get(dedupehttp.HeaderVerdict))
		id := w.Header().Get(dedupehttp.HeaderQueueID)
		require.NotEmpty(t, id)
		synctest.Wait()
		code, st := statusOf(t, a, id)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "processing", st["state"])

		// A copy while it is queued or processing is in flight, and not queued again.
		copy1 := record(a, t.Context(), update(10))
		assert.Equal(t, http.StatusServiceUnavailable, copy1.Code)
		assert.Equal(t, "in_flight", copy1.Header().Get(dedupehttp.HeaderVerdict))

		close(gate)
		s := <-got
		assert.Equal(t, string(update(10)), s.body)
		assert.Equal(t, []string{id, "trace-9", "POST", "/hook/tg?bot=1", "example.com"},
			[]string{s.queueID, s.trace, s.method, s.target, s.host})
		assert.Equal(t, "kept", s.header.Get("X-Custom"))
		assert.Empty(t, s.header.Get("X-Telegram-Bot-Api-Secret-Token"), "the secret is not queued")
		assert.Empty(t, s.header.Get("Authorization"))
		assert.Equal(t, dedupe.Key{Channel: "telegram", MessageID: "10"}, s.key)
		assert.Equal(t, dedupehttp.VerdictNew, s.verdict)
		e := <-done
		assert.NoError(t, e.err)
		assert.Equal(t, id, e.queueID)
		synctest.Wait()
		_, st = statusOf(t, a, id)
		assert.Equal(t, "done", st["state"])
		assert.EqualValues(t, 1, st["attempts"])

		dup := record(a, t.Context(), update(10))
		assert.Equal(t, http.StatusOK, dup.Code)
		assert.Equal(t, "duplicate", dup.Header().Get(dedupehttp.HeaderVerdict))
		require.NoError(t, a.Close(t.Context()))
		assert.Equal(t, dedupehttp.QueueStats{Success: 1, Latency: a.QueueStats().Latency}, a.QueueStats())
	})
}

func TestAsyncQueueRetriesThenSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.NewMemory(queue.MemoryConfig{})
		defer q.Close()
		var calls atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) < 3 {
				w.WriteHeader(http.StatusBadGateway)
			}
		})
		done := make(chan ended, 1)
		a := dedupehttp.NewAsync(dedupe.New(nil), telegram, h, dedupehttp.WithQueue(q), // DefaultMaxAttempts: 3
			dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(quiet))
		start := time.Now()
		w := record(a, t.Context(), update(1))
		require.Equal(t, http.StatusAccepted, w.Code)
		require.NoError(t, (<-done).err)
		assert.Equal(t, 3*time.Second, time.Since(start), "retried after 1 s, then 2 s")
		synctest.Wait()
		_, st := statusOf(t, a, w.Header().Get(dedupehttp.HeaderQueueID))
		assert.Equal(t, "done", st["state"])
		assert.EqualValues(t, 3, st["attempts"])
		require.NoError(t, a.Close(t.Context()))
		s := a.QueueStats()
		assert.Equal(t, [3]uint64{1, 2, 0}, [3]uint64{s.Success, s.Retried, s.Failed})
	})
}

func TestAsyncQueueFailureIsFinal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.NewMemory(queue.MemoryConfig{})
		defer q.Close()
		var calls atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				panic("handler bug")
			}
		})
		done := make(chan ended, 2)
		a := dedupehttp.NewAsync(dedupe.New(nil), telegram, h, dedupehttp.WithQueue(q),
			dedupehttp.WithMaxAttempts(1), dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(quiet))
		w := record(a, t.Context(), update(1))
		require.Equal(t, http.StatusAccepted, w.Code)
		assert.ErrorIs(t, (<-done).err, dedupehttp.ErrHandlerFailed)
		synctest.Wait()
		_, st := statusOf(t, a, w.Header().Get(dedupehttp.HeaderQueueID))
		assert.Equal(t, "failed", st["state"])
		assert.Equal(t, "dedupe: dedupehttp: handler failed: panic: handler bug", st["reason"])
		// Not marked: a redelivery is accepted and processed.
		require.Equal(t, http.StatusAccepted, record(a, t.Context(), update(1)).Code)
		assert.NoError(t, (<-done).err)
		require.NoError(t, a.Close(t.Context()))
		s := a.QueueStats()
		assert.Equal(t, [3]uint64{1, 0, 1}, [3]uint64{s.Success, s.Retried, s.Failed})
	})
}

// TestAsyncQueueDeadWorker: a message whose key is claimed by a worker that
// died is put back until the dead claim's lease runs out, then processed
// once; a message whose key is marked is settled without the handler.
func TestAsyncQueueDeadWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.NewMemory(queue.MemoryConfig{Visibility: 10 * time.Second})
		defer q.Close()
		store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		defer store.Close()
		ctx := t.Context()
		dead, marked := dedupe.Key{Channel: "telegram", MessageID: "1"}, dedupe.Key{Channel: "telegram", MessageID: "2"}
		st, err := store.Claim(ctx, dedupe.NewClaim(dead), 5*time.Second) // the dead worker's
		require.NoError(t, err)
		require.Equal(t, dedupe.Claimed, st)
		require.NoError(t, store.Mark(ctx, marked, 0))
		for _, k := range []dedupe.Key{dead, marked} {
			_, added, err := q.Push(ctx, queue.Message{ID: "q" + k.MessageID, Key: k, Method: http.MethodPost, Target: "/"})
			require.NoError(t, err)
			require.True(t, added)
		}
		var runs atomic.Int32
		var ranAt time.Duration
		start := time.Now()
		h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			runs.Add(1)
			ranAt = time.Since(start)
		})
		done := make(chan ended, 2)
		a := dedupehttp.NewAsync(dedupe.New(store), telegram, h, dedupehttp.WithQueue(q),
			dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(quiet))
		results := map[string]error{}
		for range 2 {
			e := <-done
			results[e.key.MessageID] = e.err
		}
		assert.NoError(t, results["1"])
		assert.ErrorIs(t, results["2"], dedupe.ErrDuplicate)
		assert.EqualValues(t, 1, runs.Load(), "the marked message never reached the handler")
		assert.GreaterOrEqual(t, ranAt, 5*time.Second, "not before the dead claim's lease ran out")
		require.NoError(t, a.Close(ctx))
		s := a.QueueStats()
		assert.Equal(t, uint64(1), s.Success)
		assert.Equal(t, uint64(1), s.Duplicate)
		assert.NotZero(t, s.Retried, "put back while the dead claim held the key")
		for _, id := range []string{"q1", "q2"} {
			e, ok, err := q.Status(ctx, id)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, queue.StateDone, e.State)
		}
	})
}

// TestAsyncQueueCloseGivesBack: Close that gives up on a running handler puts
// its message back in the queue, for the next process, instead of losing it.
func TestAsyncQueueCloseGivesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.NewMemory(queue.MemoryConfig{})
		defer q.Close()
		store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		defer store.Close()
		entered := make(chan struct{})
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-r.Context().Done()
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		done := make(chan ended, 1)
		a := dedupehttp.NewAsync(dedupe.New(store), telegram, h, dedupehttp.WithQueue(q),
			dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(quiet))
		w := record(a, t.Context(), update(1))
		require.Equal(t, http.StatusAccepted, w.Code)
		<-entered
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		assert.ErrorIs(t, a.Close(ctx), context.Canceled)
		assert.Empty(t, done, "not ended: put back")
		id := w.Header().Get(dedupehttp.HeaderQueueID)
		e, ok, err := q.Status(t.Context(), id)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, queue.StateQueued, e.State)
		assert.EqualValues(t, 1, a.QueueStats().Retried)

		// The next gateway on the queue processes it.
		b := dedupehttp.NewAsync(dedupe.New(store), telegram, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
			dedupehttp.WithQueue(q), dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(quiet))
		e2 := <-done
		assert.NoError(t, e2.err)
		assert.Equal(t, id, e2.queueID)
		require.NoError(t, b.Close(t.Context()))
	})
}

func TestAsyncOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.NewMemory(queue.MemoryConfig{})
		defer q.Close()
		gate := make(chan struct{})
		var mu sync.Mutex
		runs := map[string]int{}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-gate
			k, _ := dedupehttp.KeyFrom(r.Context())
			mu.Lock()
			runs[k.MessageID]++
			mu.Unlock()
		})
		done := make(chan ended, 6)
		a := dedupehttp.NewAsync(dedupe.New(nil), telegram, h, dedupehttp.WithOverflow(q),
			dedupehttp.WithWorkers(1), dedupehttp.WithQueueSize(1), dedupehttp.WithDone(doneTo(done)),
			dedupehttp.WithLogger(quiet))
		var ids []string
		for i := 1; i <= 6; i++ {
			w := record(a, t.Context(), update(i))
			require.Equal(t, http.StatusAccepted, w.Code, "message %d", i)
			ids = append(ids, w.Header().Get(dedupehttp.HeaderQueueID))
		}
		synctest.Wait()
		c, err := q.Count(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 4, c.Live, "past the memory tier's depth of 2, the rest spilled")
		depth, err := a.Depth(t.Context())
		require.NoError(t, err)
		assert.Equal(t, 6, depth)
		_, st0 := statusOf(t, a, ids[0])
		_, st1 := statusOf(t, a, ids[1])
		assert.ElementsMatch(t, []any{"queued", "processing"}, []any{st0["state"], st1["state"]},
			"memory tier: one runs, one waits for the worker")
		close(gate)
		for range 6 {
			assert.NoError(t, (<-done).err)
		}
		require.NoError(t, a.Close(t.Context()))
		for i, id := range ids {
			_, st := statusOf(t, a, id)
			assert.Equal(t, "done", st["state"], "message %d", i+1)
		}
		assert.Len(t, runs, 6)
		for id, n := range runs {
			assert.Equal(t, 1, n, "message %s", id)
		}
		assert.EqualValues(t, 6, a.QueueStats().Success)
	})
}

// failingQueue is a queue whose Push fails.
type failingQueue struct{ queue.Queue }

func (failingQueue) Push(context.Context, queue.Message) (string, bool, error) {
	return "", false, errors.New("connection refused")
}

func TestAsyncQueueUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store dedupe.Store
		queue queue.Queue
	}{
		{"store down", failingStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})}, nil},
		{"queue down", nil, failingQueue{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := queue.NewMemory(queue.MemoryConfig{})
			defer mem.Close()
			q := tc.queue
			if q == nil {
				q = mem
			} else {
				q = failingQueue{mem}
			}
			st := tc.store
			if st == nil {
				st = dedupe.NewMemoryStore(dedupe.MemoryConfig{})
			} else {
				st = existsFails{st}
			}
			a := dedupehttp.NewAsync(dedupe.New(st), telegram, http.NotFoundHandler(), dedupehttp.WithQueue(q),
				dedupehttp.WithLogger(quiet))
			w := record(a, t.Context(), update(1))
			assert.Equal(t, http.StatusServiceUnavailable, w.Code)
			assert.Equal(t, "unavailable", w.Header().Get(dedupehttp.HeaderVerdict))
			assert.NotEmpty(t, w.Header().Get("Retry-After"))
			c, err := mem.Count(t.Context())
			require.NoError(t, err)
			assert.Zero(t, c.Live, "nothing queued")
			require.NoError(t, a.Close(t.Context()))
		})
	}
}

// existsFails is a store whose Exists fails.
type existsFails struct{ dedupe.Store }

func (existsFails) Exists(context.Context, dedupe.Key) (bool, error) {
	return false, errors.New("connection refused")
}

func TestAsyncStatusHandler(t *testing.T) {
	gate := make(chan struct{})
	done := make(chan ended, 1)
	a := dedupehttp.NewAsync(dedupe.New(nil), telegram, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-gate }),
		dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(quiet))
	w := record(a, t.Context(), update(1))
	id := w.Header().Get(dedupehttp.HeaderQueueID)
	code, st := statusOf(t, a, "nope")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, map[string]any{"id": "nope", "error": "unknown queue id"}, st)
	close(gate)
	<-done
	code, st = statusOf(t, a, id)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "done", st["state"], "the memory tier keeps states too")
	assert.NotContains(t, st, "key", "nothing of the message")

	// Mounted without a path value: the last element of the path.
	rec := httptest.NewRecorder()
	http.StripPrefix("/q", a.StatusHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/q/"+id, nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	rec = httptest.NewRecorder()
	a.StatusHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/queue/"+id, nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	assert.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
	require.NoError(t, a.Close(t.Context()))
}

func TestWithQueuedHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := queue.NewMemory(queue.MemoryConfig{})
		defer q.Close()
		got := make(chan http.Header, 1)
		a := dedupehttp.NewAsync(dedupe.New(nil), telegram,
			http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got <- r.Header }),
			dedupehttp.WithQueue(q), dedupehttp.WithQueuedHeaders("x-one", "X-Telegram-Bot-Api-Secret-Token"),
			dedupehttp.WithLogger(quiet))
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(update(1))))
		r.Header.Set("X-One", "1")
		r.Header.Set("X-Two", "2")
		r.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s")
		a.ServeHTTP(httptest.NewRecorder(), r)
		h := <-got
		assert.Equal(t, "1", h.Get("X-One"))
		assert.Equal(t, "s", h.Get("X-Telegram-Bot-Api-Secret-Token"), "named, so kept")
		assert.Empty(t, h.Get("X-Two"))
		require.NoError(t, a.Close(t.Context()))
	})
}
