package dedupehttp_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/dedupehttp/edge"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/queue"
)

// pushCounter is a queue that counts the messages pushed to it.
type pushCounter struct {
	queue.Queue
	pushes atomic.Int64
}

func (q *pushCounter) Push(ctx context.Context, m queue.Message) (string, bool, error) {
	q.pushes.Add(1)
	return q.Queue.Push(ctx, m)
}

// filtered is an endpoint built with a source filter, and what it reached.
type filtered struct {
	h      http.Handler
	stats  func() dedupehttp.Stats
	store  *recordingStore
	next   *recorder
	pushed func() int64 // messages pushed to a queue, for an Async on one
}

// endpoints builds, for each way of mounting the middleware, an endpoint
// that filters its requests with src.
func endpoints(t *testing.T, src edge.Sources) map[string]func() filtered {
	t.Helper()
	tg := platform.Telegram.WithSecret("s3cret")
	opts := []dedupehttp.Option{dedupehttp.WithSourceFilter(src.Allows), dedupehttp.WithLogger(quiet)}
	return map[string]func() filtered{
		"New": func() filtered {
			st, next := newRecordingStore(), &recorder{}
			h := dedupehttp.New(dedupe.New(st, dedupe.WithLogger(quiet)), tg, next, opts...)
			return filtered{h: h, stats: h.Stats, store: st, next: next, pushed: func() int64 { return 0 }}
		},
		"Middleware": func() filtered {
			st, next := newRecordingStore(), &recorder{}
			h := dedupehttp.Middleware(dedupe.New(st, dedupe.WithLogger(quiet)), dedupehttp.FromPreset(tg), opts...)(next)
			noStats := func() dedupehttp.Stats { return dedupehttp.Stats{} } // a Middleware has no Stats method
			return filtered{h: h, stats: noStats, store: st, next: next, pushed: func() int64 { return 0 }}
		},
		"NewAsync": func() filtered {
			st, next := newRecordingStore(), &recorder{}
			a := dedupehttp.NewAsync(dedupe.New(st, dedupe.WithLogger(quiet)), dedupehttp.FromPreset(tg), next,
				dedupehttp.WithSourceFilter(src.Allows), dedupehttp.WithLogger(quiet))
			t.Cleanup(func() { _ = a.Close(context.Background()) })
			return filtered{h: a, stats: a.Stats, store: st, next: next, pushed: func() int64 { return 0 }}
		},
		"NewAsync with a queue": func() filtered {
			st, next := newRecordingStore(), &recorder{}
			q := &pushCounter{Queue: queue.NewMemory(queue.MemoryConfig{})}
			a := dedupehttp.NewAsync(dedupe.New(st, dedupe.WithLogger(quiet)), dedupehttp.FromPreset(tg), next,
				dedupehttp.WithSourceFilter(src.Allows), dedupehttp.WithLogger(quiet), dedupehttp.WithQueue(q))
			t.Cleanup(func() { _ = a.Close(context.Background()); _ = q.Close() })
			return filtered{h: a, stats: a.Stats, store: st, next: next, pushed: q.pushes.Load}
		},
	}
}

// postFrom posts a Telegram update with the secret through srv, with the
// given X-Forwarded-For (none if empty). The server sees the client's peer
// as 127.0.0.1.
func postFrom(t *testing.T, h http.Handler, xff string) *http.Response {
	t.Helper()
	srv := serve(t, h)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/hook", bytes.NewReader(update(7)))
	require.NoError(t, err)
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp
}

var (
	loopback  = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	elsewhere = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
)

// TestSourceFilter serves a request from outside the allowed ranges, one
// through a trusted proxy and one through an untrusted proxy, through each
// way of mounting the middleware: a refused request gets 403 and reaches
// neither the store, the queue nor the handler, and is counted.
func TestSourceFilter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		src     edge.Sources
		xff     string
		allowed bool
	}{
		{"peer outside the ranges", edge.Sources{Allow: edge.TelegramRanges()}, "", false},
		{"peer outside, forwarded header not trusted", edge.Sources{Allow: edge.TelegramRanges()}, "149.154.167.99", false},
		{"trusted proxy forwards a Telegram address", edge.Sources{Allow: edge.TelegramRanges(), TrustedProxies: loopback}, "149.154.167.99", true},
		{"trusted proxy forwards another address", edge.Sources{Allow: edge.TelegramRanges(), TrustedProxies: loopback}, "203.0.113.9", false},
		{"trusted proxy, forged entry on the left", edge.Sources{Allow: edge.TelegramRanges(), TrustedProxies: loopback}, "149.154.167.99, 203.0.113.9", false},
		{"untrusted proxy judged by its own address", edge.Sources{Allow: edge.TelegramRanges(), TrustedProxies: elsewhere}, "149.154.167.99", false},
		{"untrusted proxy in the ranges", edge.Sources{Allow: loopback, TrustedProxies: elsewhere}, "203.0.113.9", true},
		{"trusted proxy with garbage", edge.Sources{Allow: edge.TelegramRanges(), TrustedProxies: loopback}, "149.154.167.99, not-an-ip", false},
	} {
		for name, build := range endpoints(t, tc.src) {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				e := build()
				resp := postFrom(t, e.h, tc.xff)
				if !tc.allowed {
					assert.Equal(t, http.StatusForbidden, resp.StatusCode)
					assert.Equal(t, "forbidden", resp.Header.Get(dedupehttp.HeaderVerdict))
					assert.Zero(t, e.store.writes.Load(), "nothing reaches the store")
					assert.Zero(t, e.pushed(), "nothing reaches the queue")
					assert.Empty(t, e.next.calls(), "nothing reaches the handler")
					if name != "Middleware" {
						assert.Equal(t, uint64(1), e.stats().Forbidden)
					}
					return
				}
				assert.Less(t, resp.StatusCode, 300)
				assert.NotZero(t, e.store.writes.Load()+e.pushed(), "the delivery is deduplicated")
				assert.Zero(t, e.stats().Forbidden)
			})
		}
	}
}

// TestSourceFilterBeforeAuthentication shows that a refused request is not
// even authenticated: a forgery from outside the ranges is a 403, not a 401.
func TestSourceFilterBeforeAuthentication(t *testing.T) {
	src := edge.Sources{Allow: edge.TelegramRanges()}
	h := dedupehttp.New(dedupe.New(newRecordingStore(), dedupe.WithLogger(quiet)), platform.Telegram.WithSecret("s3cret"),
		&recorder{}, dedupehttp.WithSourceFilter(src.Allows), dedupehttp.WithLogger(quiet))
	w := deliver(h, update(1), http.Header{"X-Telegram-Bot-Api-Secret-Token": {"wrong"}})
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Equal(t, dedupehttp.Stats{Forbidden: 1}, h.Stats())
}

// A Telegram endpoint behind a load balancer at 10.0.0.0/8 serves only the
// deliveries that come from Telegram's ranges; the others get 403 before
// their body is read.
func ExampleWithSourceFilter() {
	src := edge.Sources{
		Allow:          edge.TelegramRanges(),
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	}
	served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Println("served") })
	h := dedupehttp.New(dedupe.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{})), platform.Telegram.WithSecret("s3cret"),
		served, dedupehttp.WithSourceFilter(src.Allows))
	for _, xff := range []string{"149.154.167.99", "203.0.113.9"} {
		r := httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(`{"update_id":1,"message":{"text":"hi"}}`))
		r.RemoteAddr = "10.0.0.5:40000"
		r.Header.Set("X-Forwarded-For", xff)
		r.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code)
	}
	fmt.Println("forbidden:", h.Stats().Forbidden)
	// Output:
	// served
	// 200
	// 403
	// forbidden: 1
}

// TestStatusHandlerBehindRequireAuth mounts an Async's status endpoint
// behind edge.RequireAuth on a real server: a queued message's state is
// answered to a caller with the token or a signed link, and to no one else.
func TestStatusHandlerBehindRequireAuth(t *testing.T) {
	a := dedupehttp.NewAsync(dedupe.New(newRecordingStore(), dedupe.WithLogger(quiet)),
		dedupehttp.FromPreset(platform.Telegram), &recorder{}, dedupehttp.WithLogger(quiet))
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	key := []byte("0123456789abcdef0123456789abcdef")
	token, signed := edge.BearerToken("t0ken"), edge.SignedURL(key, nil)
	verify := func(r *http.Request) bool { return token(r) || signed(r) }
	mux := http.NewServeMux()
	mux.Handle("POST /hook", a)
	mux.Handle("GET /queue/{id}", edge.RequireAuth(a.StatusHandler(), verify))
	srv := serve(t, mux)

	resp, err := srv.Client().Post(srv.URL+"/hook", "application/json", bytes.NewReader(update(41)))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	id := resp.Header.Get(dedupehttp.HeaderQueueID)
	require.NotEmpty(t, id)

	get := func(target, auth string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+target, nil)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/queue/"+id, "")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.NotContains(t, body, id, "no state without authentication")
	code, _ = get("/queue/"+id, "Bearer wrong")
	assert.Equal(t, http.StatusUnauthorized, code)

	code, body = get("/queue/"+id, "Bearer t0ken")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"id":"`+id+`"`)

	link, err := edge.SignURL(key, "/queue/"+id, time.Now().Add(time.Minute))
	require.NoError(t, err)
	code, body = get(link, "")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"state":"`)
	expired, err := edge.SignURL(key, "/queue/"+id, time.Now().Add(-time.Minute))
	require.NoError(t, err)
	code, _ = get(expired, "")
	assert.Equal(t, http.StatusUnauthorized, code)
}
