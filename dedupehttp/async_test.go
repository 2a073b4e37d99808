package dedupehttp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ended is a queued request as reported to the func set by WithDone.
type ended struct {
	key     dedupe.Key
	queueID string
	err     error
}

func doneTo(ch chan<- ended) func(context.Context, dedupe.Key, error) {
	return func(ctx context.Context, k dedupe.Key, err error) {
		ch <- ended{k, dedupehttp.QueueID(ctx), err}
	}
}

func TestAsyncAcceptsThenProcesses(t *testing.T) {
	d := dedupe.New(nil)
	done := make(chan ended, 1)
	responded := make(chan struct{})
	type seen struct {
		body           []byte
		ctxErr         error
		queueID, trace string
		method, path   string
		header         string
	}
	got := make(chan seen, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-responded // the platform has its answer before processing ends
		b, err := io.ReadAll(r.Body)
		assert.NoError(t, err)
		got <- seen{b, r.Context().Err(), dedupehttp.QueueID(r.Context()), dedupe.TraceID(r.Context()),
			r.Method, r.URL.Path, r.Header.Get("X-Telegram-Bot-Api-Secret-Token")}
		io.WriteString(w, "done")
	})
	a := dedupehttp.NewAsync(d, telegram, h, dedupehttp.WithDone(doneTo(done)))
	srv := serve(t, withTrace("trace-7", a))

	body := bigUpdate(10, 200<<10)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/hook/tg", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, "queued", resp.Header.Get(dedupehttp.HeaderVerdict))
	id := resp.Header.Get(dedupehttp.HeaderQueueID)
	assert.NotEmpty(t, id)

	// A copy while it waits or runs is in flight; it never reaches the handler,
	// and is asked to come back.
	inFlight := post(srv, body)
	assert.Equal(t, http.StatusServiceUnavailable, inFlight.status)
	assert.Equal(t, "in_flight", inFlight.verdict)

	close(responded)
	s := <-got
	assert.True(t, bytes.Equal(body, s.body), "body intact")
	assert.NoError(t, s.ctxErr, "context outlives the response")
	assert.Equal(t, id, s.queueID)
	assert.Equal(t, "trace-7", s.trace)
	assert.Equal(t, []string{"POST", "/hook/tg", "s3cret"}, []string{s.method, s.path, s.header})
	e := <-done
	assert.NoError(t, e.err)
	assert.Equal(t, id, e.queueID)
	assert.Equal(t, dedupe.Key{Channel: "telegram", MessageID: "10"}, e.key)

	dup := post(srv, body)
	assert.Equal(t, http.StatusOK, dup.status)
	assert.Equal(t, "duplicate", dup.verdict)
	assert.Empty(t, dup.header.Get(dedupehttp.HeaderQueueID))

	require.NoError(t, a.Close(t.Context()))
	require.NoError(t, a.Close(t.Context()), "Close twice")
	assert.EqualValues(t, 1, d.Stats().Processed)
}

func TestAsyncBurstLargerThanQueue(t *testing.T) {
	const (
		workers = 2
		queue   = 3
		burst   = 40
	)
	d := dedupe.New(nil)
	gate := make(chan struct{})
	var mu sync.Mutex
	processed := map[string]int{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-gate
		k, err := platform.Telegram.Extract(mustBody(r), r.Header)
		assert.NoError(t, err)
		mu.Lock()
		processed[k.MessageID]++
		mu.Unlock()
	})
	done := make(chan ended, burst)
	a := dedupehttp.NewAsync(d, telegram, h,
		dedupehttp.WithWorkers(workers), dedupehttp.WithQueueSize(queue), dedupehttp.WithDone(doneTo(done)),
		dedupehttp.WithLogger(quiet))
	srv := serve(t, a)

	replies := make([]reply, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() { replies[i] = post(srv, update(i+1)) })
	}
	wg.Wait()

	var retry []int
	accepted := 0
	for i, r := range replies {
		require.NoError(t, r.err)
		switch r.status {
		case http.StatusAccepted:
			accepted++
		case http.StatusServiceUnavailable:
			assert.Equal(t, "unavailable", r.verdict)
			assert.Equal(t, "5", r.header.Get("Retry-After"))
			retry = append(retry, i+1)
		default:
			assert.Failf(t, "unexpected status", "request %d: status %d", i+1, r.status)
		}
	}
	assert.Equal(t, workers+queue, accepted, "accepted while the handlers are blocked")

	close(gate)
	for range accepted {
		assert.NoError(t, (<-done).err)
	}
	// The platform retries the refused requests: each is processed now.
	for _, id := range retry {
		r := post(srv, update(id))
		require.Equal(t, http.StatusAccepted, r.status, "retry of %d", id)
		e := <-done
		assert.NoError(t, e.err)
		assert.Equal(t, strconv.Itoa(id), e.key.MessageID)
	}
	require.NoError(t, a.Close(t.Context()))

	assert.Len(t, processed, burst, "every message processed")
	for id, n := range processed {
		assert.Equal(t, 1, n, "message %s processed %d times", id, n)
	}
	s := d.Stats()
	assert.EqualValues(t, burst, s.Processed)
	assert.EqualValues(t, len(retry), s.Failed, "a refused request's claim is released")
}

func mustBody(r *http.Request) []byte {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		panic(err)
	}
	return b
}

func TestAsyncFullQueueStillAnswersDuplicates(t *testing.T) {
	d := dedupe.New(nil)
	gate := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bytes.Contains(mustBody(r), []byte(`"update_id":2`)) {
			<-gate
		}
	})
	done := make(chan ended, 3)
	a := dedupehttp.NewAsync(d, telegram, h,
		dedupehttp.WithWorkers(1), dedupehttp.WithQueueSize(0), dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(quiet))
	ctx := t.Context()

	require.Equal(t, http.StatusAccepted, record(a, ctx, update(1)).Code)
	require.NoError(t, (<-done).err)
	require.Equal(t, http.StatusAccepted, record(a, ctx, update(2)).Code) // holds the only slot

	for _, tc := range []struct {
		body    []byte
		status  int
		verdict string
	}{
		{update(1), http.StatusOK, "duplicate"},
		{update(2), http.StatusServiceUnavailable, "in_flight"},
		{update(3), http.StatusServiceUnavailable, "unavailable"},
	} {
		w := record(a, ctx, tc.body)
		assert.Equal(t, tc.status, w.Code)
		assert.Equal(t, tc.verdict, w.Header().Get(dedupehttp.HeaderVerdict))
	}
	close(gate)
	require.NoError(t, (<-done).err)
	assert.Equal(t, http.StatusAccepted, record(a, ctx, update(3)).Code, "released after the refusal")
	require.NoError(t, (<-done).err)
	require.NoError(t, a.Close(ctx))
}

func TestAsyncCloseWaitsForWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := dedupe.New(nil)
		gate := make(chan struct{})
		var calls atomic.Int32
		h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			calls.Add(1)
			<-gate
		})
		done := make(chan ended, 2)
		a := dedupehttp.NewAsync(d, telegram, h,
			dedupehttp.WithWorkers(1), dedupehttp.WithQueueSize(1), dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(quiet))
		ctx := t.Context()
		require.Equal(t, http.StatusAccepted, record(a, ctx, update(1)).Code)
		require.Equal(t, http.StatusAccepted, record(a, ctx, update(2)).Code)

		closed := make(chan error)
		go func() { closed <- a.Close(ctx) }()
		synctest.Wait()
		select {
		case err := <-closed:
			require.Failf(t, "Close returned while a handler runs", "Close returned %v", err)
		default:
		}
		w := record(a, ctx, update(3))
		assert.Equal(t, http.StatusServiceUnavailable, w.Code, "closed: no new work")
		assert.Equal(t, "unavailable", w.Header().Get(dedupehttp.HeaderVerdict))

		close(gate)
		assert.NoError(t, <-closed)
		assert.Len(t, done, 2, "Done reported before Close returned")
		assert.EqualValues(t, 2, calls.Load(), "the queue was drained")
		assert.EqualValues(t, 2, d.Stats().Processed)
		assert.NoError(t, a.Close(ctx))
	})
}

func TestAsyncCloseAbandons(t *testing.T) {
	d := dedupe.New(nil)
	entered := make(chan string, 1) // the key of the one request that runs
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := dedupehttp.KeyFrom(r.Context())
		entered <- k.MessageID // whichever got the only worker first
		<-r.Context().Done()
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	done := make(chan ended, 3)
	var logs logBuffer
	a := dedupehttp.NewAsync(d, telegram, h,
		dedupehttp.WithWorkers(1), dedupehttp.WithQueueSize(2), dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(logs.logger()))
	for i := 1; i <= 3; i++ {
		require.Equal(t, http.StatusAccepted, record(a, t.Context(), update(i)).Code)
	}
	running := <-entered

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	assert.ErrorIs(t, a.Close(ctx), context.Canceled)
	require.Len(t, done, 3)
	for range 3 {
		e := <-done
		if e.key.MessageID == running {
			assert.ErrorIs(t, e.err, dedupehttp.ErrHandlerFailed, "the running handler was cancelled")
		} else {
			assert.ErrorIs(t, e.err, dedupehttp.ErrAbandoned)
		}
	}
	abandoned := 0
	for _, rec := range logs.records(t) {
		if rec["level"] == "ERROR" && rec["msg"] == "dedupe: dedupehttp: queued request abandoned at close; the platform will not redeliver it" {
			abandoned++
		}
	}
	assert.Equal(t, 2, abandoned)
	// Every claim was released: the messages can be processed again.
	for i := 1; i <= 3; i++ {
		k := dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(i)}
		assert.NoError(t, d.Do(t.Context(), k, func(context.Context) error { return nil }))
	}
	assert.Zero(t, d.Stats().Processed-3)
}

func TestAsyncHandlerFailureReleases(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(w http.ResponseWriter)
	}{
		{"500", func(w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) }},
		{"panic", func(http.ResponseWriter) { panic("handler bug") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dedupe.New(nil)
			var calls atomic.Int32
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					tc.fail(w)
				}
			})
			var logs logBuffer
			done := make(chan ended, 1)
			a := dedupehttp.NewAsync(d, telegram, h, dedupehttp.WithDone(doneTo(done)),
				dedupehttp.WithLogger(logs.logger()))
			defer a.Close(t.Context())

			w := record(a, t.Context(), update(5))
			require.Equal(t, http.StatusAccepted, w.Code)
			e := <-done
			assert.ErrorIs(t, e.err, dedupehttp.ErrHandlerFailed)
			var failed bool
			for _, rec := range logs.records(t) {
				if rec["level"] == "ERROR" && rec["key"] == "telegram:5" &&
					rec["queue_id"] == w.Header().Get(dedupehttp.HeaderQueueID) {
					failed = true
				}
			}
			assert.True(t, failed, "failure logged at error level")

			require.Equal(t, http.StatusAccepted, record(a, t.Context(), update(5)).Code, "released: a redelivery is processed")
			assert.NoError(t, (<-done).err)
			assert.Equal(t, "duplicate", record(a, t.Context(), update(5)).Header().Get(dedupehttp.HeaderVerdict))
		})
	}
}

func TestAsyncPassThroughIsSynchronous(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "challenge-accepted")
	})
	a := dedupehttp.NewAsync(dedupe.New(nil), dedupehttp.FromPreset(platform.Slack), h)
	defer a.Close(t.Context())
	w := record(a, t.Context(), []byte(`{"type":"url_verification","challenge":"c"}`))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "challenge-accepted", w.Body.String())
	assert.Equal(t, http.StatusBadRequest, record(a, t.Context(), []byte(`{`)).Code)
}

func TestAsyncCancelledRequestCancelsClaim(t *testing.T) {
	store := newBlockingStore()
	done := make(chan ended, 1)
	a := dedupehttp.NewAsync(dedupe.New(store), telegram, http.NotFoundHandler(),
		dedupehttp.WithDone(doneTo(done)))
	ctx, cancel := context.WithCancel(t.Context())
	replied := make(chan int)
	go func() { replied <- record(a, ctx, update(1)).Code }()
	<-store.entered
	cancel()
	assert.ErrorIs(t, <-store.ctxErr, context.Canceled)
	assert.Equal(t, http.StatusServiceUnavailable, <-replied)
	require.NoError(t, a.Close(t.Context()))
	assert.Empty(t, done, "never queued")
}

func TestAsyncStoreErrorIsUnavailable(t *testing.T) {
	closed := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	require.NoError(t, closed.Close())
	a := dedupehttp.NewAsync(dedupe.New(closed), telegram, http.NotFoundHandler())
	w := record(a, t.Context(), update(1))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.NotEmpty(t, w.Header().Get("Retry-After"))
	require.NoError(t, a.Close(t.Context()))
}

// TestAsyncOptions checks the options only an Async reads: the status of the
// answer to a queued request, the default worker count, and a queue size of
// zero or less, which leaves no waiting room.
func TestAsyncOptions(t *testing.T) {
	t.Run("accepted status", func(t *testing.T) {
		done := make(chan ended, 1)
		a := dedupehttp.NewAsync(dedupe.New(nil), telegram, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
			dedupehttp.WithAcceptedStatus(http.StatusOK), dedupehttp.WithDone(doneTo(done)), dedupehttp.WithLogger(quiet))
		w := record(a, t.Context(), update(1))
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, "queued", w.Header().Get(dedupehttp.HeaderVerdict))
		require.NoError(t, (<-done).err)
		require.NoError(t, a.Close(t.Context()))
	})
	for _, tc := range []struct {
		name     string
		opts     []dedupehttp.AsyncOption
		accepted int // requests accepted before the next is refused
	}{
		{"default workers, no queue", []dedupehttp.AsyncOption{dedupehttp.WithWorkers(0), dedupehttp.WithQueueSize(0)}, dedupehttp.DefaultWorkers},
		{"negative queue size", []dedupehttp.AsyncOption{dedupehttp.WithWorkers(2), dedupehttp.WithQueueSize(-5)}, 2},
		{"workers and queue", []dedupehttp.AsyncOption{dedupehttp.WithWorkers(2), dedupehttp.WithQueueSize(3)}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := make(chan struct{})
			h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-gate })
			a := dedupehttp.NewAsync(dedupe.New(nil), telegram, h, append(tc.opts, dedupehttp.WithLogger(quiet))...)
			for i := range tc.accepted {
				require.Equal(t, http.StatusAccepted, record(a, t.Context(), update(i+1)).Code, "request %d", i+1)
			}
			w := record(a, t.Context(), update(tc.accepted+1))
			assert.Equal(t, http.StatusServiceUnavailable, w.Code)
			assert.Equal(t, "unavailable", w.Header().Get(dedupehttp.HeaderVerdict))
			close(gate)
			require.NoError(t, a.Close(t.Context()))
		})
	}
}
