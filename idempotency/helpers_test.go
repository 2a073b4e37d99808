package idempotency

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// api is a handler under test: it counts its runs per body, and answers 201
// with the body echoed, a Location, a cookie and a header not kept.
type api struct {
	runs    atomic.Int64
	entered chan struct{} // if not nil, told when a run starts
	gate    chan struct{} // if not nil, a run waits for it to close
	status  func(n int64) int
	body    func(n int64) []byte
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.runs.Add(1)
	in, _ := io.ReadAll(r.Body)
	if a.entered != nil {
		a.entered <- struct{}{}
	}
	if a.gate != nil {
		<-a.gate
	}
	status := http.StatusCreated
	if a.status != nil {
		status = a.status(n)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/v1/messages/%d", n))
	w.Header().Set("Set-Cookie", "session=s")
	w.Header().Set("X-Run", fmt.Sprint(n))
	w.WriteHeader(status)
	if a.body != nil {
		_, _ = w.Write(a.body(n))
		return
	}
	_, _ = fmt.Fprintf(w, `{"run":%d,"echo":%q}`, n, in)
}

// fixture is a middleware over a store, with the Deduper to read counters
// from.
type fixture struct {
	t     *testing.T
	store dedupe.Store
	d     *dedupe.Deduper
	h     http.Handler
}

func newFixture(t *testing.T, store dedupe.Store, next http.Handler, opts ...Option) *fixture {
	t.Helper()
	if store == nil {
		store = dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	}
	d := dedupe.New(store)
	t.Cleanup(func() { _ = d.Close() })
	return &fixture{t: t, store: store, d: d, h: Middleware(d, opts...)(next)}
}

// request is one request to the fixture.
type request struct {
	method, path, key, body string
	header                  map[string]string
}

func post(key, body string) request {
	return request{method: http.MethodPost, path: "/v1/messages", key: key, body: body}
}

func (f *fixture) do(rq request) *httptest.ResponseRecorder {
	r := httptest.NewRequest(rq.method, rq.path, strings.NewReader(rq.body))
	if rq.key != "" {
		r.Header.Set("Idempotency-Key", rq.key)
	}
	for k, v := range rq.header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

// async runs rq on its own goroutine; the result arrives on the channel.
func (f *fixture) async(rq request) <-chan *httptest.ResponseRecorder {
	ch := make(chan *httptest.ResponseRecorder, 1)
	go func() { ch <- f.do(rq) }()
	return ch
}

// waitFor waits, without a deadline of its own, until cond holds; the
// test's timeout bounds it.
func waitFor(cond func() bool) {
	for !cond() {
		time.Sleep(time.Millisecond) // polls a condition; no ordering rests on it
	}
}

// assertProblem checks that w is an RFC 9457 problem of kind k.
func assertProblem(t *testing.T, w *httptest.ResponseRecorder, k kind) problem {
	t.Helper()
	require.Equal(t, k.status, w.Code, w.Body.String())
	assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	assert.Equal(t, `<`+DefaultDocs+`>; rel="describedby"`, w.Header().Get("Link"))
	var p problem
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p), w.Body.String())
	assert.Equal(t, DefaultDocs+"#"+k.name, p.Type)
	assert.Equal(t, k.title, p.Title)
	assert.Equal(t, k.status, p.Status)
	assert.NotEmpty(t, p.Detail)
	assert.Empty(t, w.Header().Get(HeaderReplayed))
	return p
}

// assertSame checks that replay is first again, byte for byte in status,
// kept headers and body, with the replay header, and without the headers
// not kept.
func assertSame(t *testing.T, first, replay *httptest.ResponseRecorder) {
	t.Helper()
	require.Equal(t, first.Code, replay.Code, replay.Body.String())
	assert.Equal(t, first.Body.String(), replay.Body.String())
	for _, h := range []string{"Content-Type", "Location"} {
		assert.Equal(t, first.Header().Values(h), replay.Header().Values(h), h)
	}
	assert.Equal(t, "true", replay.Header().Get(HeaderReplayed))
	assert.Empty(t, first.Header().Get(HeaderReplayed))
	assert.Empty(t, replay.Header().Get("Set-Cookie"))
	assert.Empty(t, replay.Header().Get("X-Run"))
}

// clock is a settable clock for the store.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	require.NoError(t, err)
	return d
}
