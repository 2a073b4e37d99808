package dedupehttp_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var telegram = dedupehttp.FromPreset(platform.Telegram)

func TestConcurrentDuplicatesRunHandlerOnce(t *testing.T) {
	d := dedupe.New(nil)
	var calls atomic.Int32
	entered := make(chan struct{})
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		io.WriteString(w, "processed")
	})
	srv := serve(t, dedupehttp.Middleware(d, telegram)(h))

	const copies = 32
	replies := make(chan reply, copies)
	var wg sync.WaitGroup
	for range copies {
		wg.Go(func() { replies <- post(srv, update(42)) })
	}
	<-entered
	// Every copy but the one being processed is answered while it runs, and
	// asked to come back: the Deduper does not wait for the owner.
	for range copies - 1 {
		r := <-replies
		require.NoError(t, r.err)
		assert.Equal(t, http.StatusServiceUnavailable, r.status)
		assert.NotEmpty(t, r.header.Get("Retry-After"))
		assert.Equal(t, "in_flight", r.verdict)
	}
	close(release)
	wg.Wait()
	owner := <-replies
	require.NoError(t, owner.err)
	assert.Equal(t, "processed", owner.body)
	assert.Empty(t, owner.verdict)

	later := post(srv, update(42))
	assert.Equal(t, http.StatusOK, later.status)
	assert.Equal(t, "duplicate", later.verdict)
	assert.Empty(t, later.body)
	assert.EqualValues(t, 1, calls.Load(), "handler calls")

	s := d.Stats()
	assert.EqualValues(t, 1, s.Processed)
	assert.EqualValues(t, copies-1, s.InFlight)
	assert.EqualValues(t, 1, s.Duplicates)
}

func TestFailedHandlerRetryIsProcessed(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(w http.ResponseWriter)
	}{
		{"500", func(w http.ResponseWriter) { http.Error(w, "down", http.StatusInternalServerError) }},
		{"503 after a body", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "busy")
		}},
		{"panic", func(http.ResponseWriter) { panic("handler bug") }},
		{"abort", func(http.ResponseWriter) { panic(http.ErrAbortHandler) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dedupe.New(nil)
			var calls atomic.Int32
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					tc.fail(w)
					return
				}
				io.WriteString(w, "ok")
			})
			srv := serve(t, dedupehttp.Middleware(d, telegram)(h))

			first := post(srv, update(7))
			if first.err == nil { // a panic aborts the connection instead
				assert.GreaterOrEqual(t, first.status, 500)
			}
			retry := post(srv, update(7))
			require.NoError(t, retry.err)
			assert.Equal(t, http.StatusOK, retry.status)
			assert.Equal(t, "ok", retry.body)
			assert.Empty(t, retry.verdict)

			again := post(srv, update(7))
			assert.Equal(t, "duplicate", again.verdict)
			assert.EqualValues(t, 2, calls.Load())
			assert.EqualValues(t, 1, d.Stats().Failed)
		})
	}
}

func TestPanicGoesOnAndReleases(t *testing.T) {
	d := dedupe.New(nil)
	mw := dedupehttp.Middleware(d, telegram)
	boom := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	assert.PanicsWithValue(t, "boom", func() { record(boom, t.Context(), update(1)) })

	ok := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	assert.Equal(t, http.StatusOK, record(ok, t.Context(), update(1)).Code)
	assert.Equal(t, "duplicate", record(ok, t.Context(), update(1)).Header().Get(dedupehttp.HeaderVerdict))
}

func TestFailureStatusOption(t *testing.T) {
	d := dedupe.New(nil)
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	failed := func(s int) bool { return s >= 500 || s == http.StatusTooManyRequests }
	mw := dedupehttp.Middleware(d, telegram, dedupehttp.WithFailureStatus(failed))(h)
	assert.Equal(t, http.StatusTooManyRequests, record(mw, t.Context(), update(1)).Code)
	assert.Equal(t, http.StatusOK, record(mw, t.Context(), update(1)).Code)
	assert.EqualValues(t, 2, calls.Load())

	// A policy may remember a refusal.
	d = dedupe.New(nil)
	keep422 := func(s int) bool { return (s < 200 || s > 299) && s != http.StatusUnprocessableEntity }
	bad := dedupehttp.Middleware(d, telegram, dedupehttp.WithFailureStatus(keep422), dedupehttp.WithLogger(quiet))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnprocessableEntity) }))
	assert.Equal(t, http.StatusUnprocessableEntity, record(bad, t.Context(), update(1)).Code)
	assert.Equal(t, "duplicate", record(bad, t.Context(), update(1)).Header().Get(dedupehttp.HeaderVerdict))
}

func TestBodyReachesHandlerIntact(t *testing.T) {
	readAll := func(r *http.Request) (dedupe.Key, error) { // consumes r.Body
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return dedupe.Key{}, err
		}
		return platform.Telegram.Extract(b, r.Header)
	}
	for _, ex := range []struct {
		name    string
		extract dedupehttp.Extractor
	}{{"FromPreset", telegram}, {"reading extractor", readAll}} {
		for _, size := range []int{0, 100, 64 << 10, dedupehttp.DefaultMaxBodySize - 100} {
			for _, chunked := range []bool{false, true} {
				t.Run(ex.name+"/"+strconv.Itoa(size)+"/chunked="+strconv.FormatBool(chunked), func(t *testing.T) {
					want := bigUpdate(size+1, size)
					require.LessOrEqual(t, len(want), dedupehttp.DefaultMaxBodySize)
					got := make(chan []byte, 1)
					h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						b, err := io.ReadAll(r.Body)
						assert.NoError(t, err)
						again, err := dedupehttp.Body(r)
						assert.NoError(t, err)
						assert.True(t, bytes.Equal(b, again), "Body(r) after reading r.Body")
						got <- b
					})
					srv := serve(t, dedupehttp.Middleware(dedupe.New(nil), ex.extract)(h))

					var body io.Reader = bytes.NewReader(want)
					if chunked {
						body = io.MultiReader(body) // length unknown: chunked encoding
					}
					resp, err := srv.Client().Post(srv.URL, "application/json", body)
					require.NoError(t, err)
					resp.Body.Close()
					require.Equal(t, http.StatusOK, resp.StatusCode)
					b := <-got
					assert.Equal(t, len(want), len(b))
					assert.True(t, bytes.Equal(want, b), "body changed on its way to the handler")
				})
			}
		}
	}
}

func TestBodyTooLarge(t *testing.T) {
	var calls atomic.Int32
	extract := func(r *http.Request) (dedupe.Key, error) {
		calls.Add(1)
		return telegram(r)
	}
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) })
	srv := serve(t, dedupehttp.Middleware(dedupe.New(nil), extract, dedupehttp.WithMaxBodySize(1000))(h))

	for _, chunked := range []bool{false, true} {
		var body io.Reader = bytes.NewReader(bigUpdate(1, 2000))
		if chunked {
			body = io.MultiReader(body)
		}
		resp, err := srv.Client().Post(srv.URL, "application/json", body)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "chunked=%v", chunked)
	}
	assert.Equal(t, http.StatusOK, post(srv, bigUpdate(2, 900)).status)
	assert.EqualValues(t, 2, calls.Load(), "only the small request was extracted and handled")

	// The limit is inclusive.
	body := bigUpdate(3, 900)
	for _, tc := range []struct {
		limit int
		want  int
	}{{len(body), http.StatusOK}, {len(body) - 1, http.StatusRequestEntityTooLarge}} {
		for _, chunked := range []bool{false, true} {
			mw := dedupehttp.Middleware(dedupe.New(nil), telegram, dedupehttp.WithMaxBodySize(int64(tc.limit)))
			srv := serve(t, mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
			var r io.Reader = bytes.NewReader(body)
			if chunked {
				r = io.MultiReader(r)
			}
			resp, err := srv.Client().Post(srv.URL, "application/json", r)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tc.want, resp.StatusCode, "limit %d, chunked=%v", tc.limit, chunked)
		}
	}
}

func TestInFlightAnswer(t *testing.T) {
	busy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	for _, tc := range []struct {
		name string
		opts []dedupehttp.Option
		want int
	}{
		{"default", nil, http.StatusServiceUnavailable},
		{"custom", []dedupehttp.Option{dedupehttp.WithInFlight(busy)}, http.StatusServiceUnavailable},
		{"acknowledge", []dedupehttp.Option{dedupehttp.WithInFlight(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entered := make(chan struct{})
			release := make(chan struct{})
			var calls atomic.Int32
			h := dedupehttp.Middleware(dedupe.New(nil), telegram, tc.opts...)(
				http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
					calls.Add(1)
					close(entered)
					<-release
				}))
			done := make(chan int)
			go func() { done <- record(h, t.Context(), update(3)).Code }()
			<-entered
			w := record(h, t.Context(), update(3))
			assert.Equal(t, tc.want, w.Code)
			assert.Equal(t, "in_flight", w.Header().Get(dedupehttp.HeaderVerdict))
			close(release)
			assert.Equal(t, http.StatusOK, <-done)
			assert.EqualValues(t, 1, calls.Load())
		})
	}
}

func TestDuplicateAnswer(t *testing.T) {
	dup := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := dedupehttp.Body(r)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"echo":`+string(b)+`}`)
	})
	h := dedupehttp.Middleware(dedupe.New(nil), telegram, dedupehttp.WithDuplicate(dup))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	record(h, t.Context(), update(9))
	w := record(h, t.Context(), update(9))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.JSONEq(t, `{"ok":true,"echo":`+string(update(9))+`}`, w.Body.String())
}

func TestExtractErrors(t *testing.T) {
	slackChallenge := []byte(`{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	unknown := errors.New("unknown tenant")
	reject := func(w http.ResponseWriter, r *http.Request, err error) bool {
		if errors.Is(err, dedupe.ErrNoMessageID) {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return false
		}
		return dedupehttp.DefaultExtractError(w, r, err)
	}
	for _, tc := range []struct {
		name    string
		extract dedupehttp.Extractor
		opts    []dedupehttp.Option
		body    []byte
		status  int
		handled bool
	}{
		{"slack url_verification passes", dedupehttp.FromPreset(platform.Slack), nil, slackChallenge, http.StatusOK, true},
		{"no id passes", telegram, nil, []byte(`{"message":{"text":"no update_id"}}`), http.StatusOK, true},
		{"empty body passes", telegram, nil, nil, http.StatusOK, true},
		{"not JSON", telegram, nil, []byte(`{"update_id":`), http.StatusBadRequest, false},
		{"wrong shape", dedupehttp.FromPreset(platform.Feishu), nil, []byte(`{"schema":"2.0","header":"x"}`), http.StatusBadRequest, false},
		{"invalid id", telegram, nil, []byte(`{"update_id":true}`), http.StatusBadRequest, false},
		{"other error", func(*http.Request) (dedupe.Key, error) { return dedupe.Key{}, unknown }, nil, update(1), http.StatusBadRequest, false},
		{"invalid key from a custom extractor", func(*http.Request) (dedupe.Key, error) {
			return dedupe.Key{Channel: "a:b", MessageID: "1"}, nil
		}, nil, update(1), http.StatusBadRequest, false},
		{"policy refuses no id", dedupehttp.FromPreset(platform.Slack), []dedupehttp.Option{dedupehttp.WithExtractError(reject)},
			slackChallenge, http.StatusUnprocessableEntity, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var handled []byte
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				handled, _ = io.ReadAll(r.Body)
				if handled == nil {
					handled = []byte{}
				}
				w.WriteHeader(http.StatusOK)
			})
			d := dedupe.New(nil)
			w := record(dedupehttp.Middleware(d, tc.extract, tc.opts...)(h), t.Context(), tc.body)
			assert.Equal(t, tc.status, w.Code, w.Body.String())
			if tc.handled {
				assert.Equal(t, string(tc.body), string(handled))
			} else {
				assert.Nil(t, handled, "handler called")
			}
			assert.Zero(t, d.Stats().Processed)
		})
	}
}

func TestStoreErrorIsUnavailable(t *testing.T) {
	closed := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	require.NoError(t, closed.Close())
	for _, tc := range []struct {
		name       string
		d          *dedupe.Deduper
		opts       []dedupehttp.Option
		retryAfter string
	}{
		{"closed store", dedupe.New(closed), nil, "5"},
		{"outage", dedupe.New(failingStore{closed}), []dedupehttp.Option{dedupehttp.WithRetryAfter(1500e6)}, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			h := dedupehttp.Middleware(tc.d, telegram, tc.opts...)(
				http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
			w := record(h, t.Context(), update(1))
			assert.Equal(t, http.StatusServiceUnavailable, w.Code)
			assert.Equal(t, tc.retryAfter, w.Header().Get("Retry-After"))
			assert.Equal(t, "unavailable", w.Header().Get(dedupehttp.HeaderVerdict))
			assert.Zero(t, calls.Load())
		})
	}

	t.Run("fallback", func(t *testing.T) {
		d := dedupe.New(failingStore{closed}, dedupe.WithFallback(dedupe.NewMemoryStore(dedupe.MemoryConfig{})))
		h := dedupehttp.Middleware(d, telegram)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		assert.Equal(t, http.StatusOK, record(h, t.Context(), update(1)).Code)
		assert.Equal(t, "duplicate", record(h, t.Context(), update(1)).Header().Get(dedupehttp.HeaderVerdict))
		assert.EqualValues(t, 1, d.Stats().Fallbacks, "the duplicate was answered by the fallback's mark")
	})
}

// withTrace is a parent middleware that puts a trace id in the request's
// context.
func withTrace(id string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(dedupe.ContextWithTraceID(r.Context(), id)))
	})
}

func TestContextFlows(t *testing.T) {
	t.Run("trace id reaches the store's log records and the handler", func(t *testing.T) {
		var logs logBuffer
		d := dedupe.New(nil, dedupe.WithLogger(logs.logger()))
		var seen string
		h := dedupehttp.Middleware(d, telegram)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = dedupe.TraceID(r.Context())
		}))
		srv := serve(t, withTrace("trace-42", h))
		require.Equal(t, http.StatusOK, post(srv, update(8)).status)
		assert.Equal(t, "trace-42", seen)

		var found bool
		for _, rec := range logs.records(t) {
			if rec["msg"] == "dedupe: decision" && rec["result"] == "processed" {
				found = true
				assert.Equal(t, "trace-42", rec["trace_id"])
				assert.Equal(t, "telegram", rec["platform"])
				assert.Equal(t, "8", rec["message_id"])
			}
		}
		assert.True(t, found, "no processed record in %v", logs.records(t))
	})

	t.Run("cancelled request cancels the store call", func(t *testing.T) {
		store := newBlockingStore()
		var calls atomic.Int32
		h := dedupehttp.Middleware(dedupe.New(store), telegram)(
			http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- record(h, ctx, update(1)) }()
		<-store.entered
		cancel()
		assert.ErrorIs(t, <-store.ctxErr, context.Canceled)
		assert.Equal(t, http.StatusServiceUnavailable, (<-done).Code)
		assert.Zero(t, calls.Load())
	})
}

func TestFlushAndResponseController(t *testing.T) {
	read := make(chan struct{})
	h := dedupehttp.Middleware(dedupe.New(nil), telegram)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok := w.(http.Flusher)
		assert.True(t, ok, "ResponseWriter is an http.Flusher")
		rc := http.NewResponseController(w)
		assert.NoError(t, rc.EnableFullDuplex(), "reaches the server's ResponseWriter")
		io.WriteString(w, "first\n")
		assert.NoError(t, rc.Flush())
		<-read // the client has the first line before the handler ends
		io.WriteString(w, "second\n")
	}))
	srv := serve(t, h)
	resp, err := srv.Client().Post(srv.URL, "application/json", bytes.NewReader(update(1)))
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "first\n", line)
	close(read)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.Equal(t, "second\n", string(rest))
}

func TestBodyOutsideMiddleware(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("hello"))
	b, err := dedupehttp.Body(r)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(b))
	again, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(again))

	b, err = dedupehttp.Body(httptest.NewRequest(http.MethodGet, "/", nil))
	assert.NoError(t, err)
	assert.Empty(t, b)
}
