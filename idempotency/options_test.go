package idempotency

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWithFingerprint: a fingerprint that ignores the body makes a request
// with another body the same request: it is replayed.
func TestWithFingerprint(t *testing.T) {
	a := &api{}
	f := newFixture(t, nil, a, WithFingerprint(func(r *http.Request, _ []byte) []byte { return []byte(r.URL.Path) }))
	first := f.do(post(key1, "hello"))
	assertSame(t, first, f.do(post(key1, "a new timestamp")))
	assert.EqualValues(t, 1, a.runs.Load())
}

// TestWithHeaders: only the listed headers are replayed, never Set-Cookie.
func TestWithHeaders(t *testing.T) {
	f := newFixture(t, nil, &api{}, WithHeaders("X-Run", "Set-Cookie"))
	first := f.do(post(key1, "hello"))
	replay := f.do(post(key1, "hello"))
	assert.Equal(t, first.Header().Get("X-Run"), replay.Header().Get("X-Run"))
	assert.Empty(t, replay.Header().Get("Location"))
	assert.Empty(t, replay.Header().Get("Set-Cookie"))
	assert.Equal(t, first.Body.String(), replay.Body.String())
}

// TestWithChannel: keys live on the channel given, and an invalid channel
// keeps the default.
func TestWithChannel(t *testing.T) {
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	f := newFixture(t, store, &api{}, WithChannel("api-v1"))
	f.do(post(key1, "hello"))
	ok, err := store.Exists(t.Context(), keysFor("api-v1", "", "8e03978e-40d5-43e8-bc93-6894a57f9324").main)
	require.NoError(t, err)
	assert.True(t, ok)
	for _, bad := range []string{"", "a:b", strings.Repeat("c", 65)} {
		assert.Equal(t, DefaultChannel, newConfig([]Option{WithChannel(bad)}).channel, bad)
	}
}

// TestWithDocs: the problem types and the Link are made from the URL given.
func TestWithDocs(t *testing.T) {
	f := newFixture(t, nil, &api{}, WithDocs("https://api.example.com/docs/idempotency"))
	w := f.do(post("", "hello"))
	assert.Equal(t, `<https://api.example.com/docs/idempotency>; rel="describedby"`, w.Header().Get("Link"))
	var p problem
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
	assert.Equal(t, "https://api.example.com/docs/idempotency#key-missing", p.Type)
}

// TestStreamingHandler: a handler that flushes part of its answer reaches
// the client as it goes and is replayed whole.
func TestStreamingHandler(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		assert.NoError(t, http.NewResponseController(w).Flush())
		_, _ = io.WriteString(w, "data: two\n\n")
	})
	srv := httptest.NewServer(newFixture(t, nil, h).h)
	defer srv.Close()
	get := func() (string, string) {
		r, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("q"))
		r.Header.Set("Idempotency-Key", key1)
		resp, err := http.DefaultClient.Do(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b), resp.Header.Get(HeaderReplayed)
	}
	first, replayed := get()
	assert.Equal(t, "data: one\n\ndata: two\n\n", first)
	assert.Empty(t, replayed)
	again, replayed := get()
	assert.Equal(t, first, again)
	assert.Equal(t, "true", replayed)
}

// TestSpan: the expiry policy is written in whole units.
func TestSpan(t *testing.T) {
	for d, want := range map[string]string{"24h": "24 hours", "1h": "1 hour", "90m": "90 minutes", "45s": "45 seconds", "1500ms": "1.5s"} {
		c := newConfig([]Option{WithTTL(mustDuration(t, d))})
		assert.Equal(t, "A key expires "+want+" after its request was processed.", c.expiry())
	}
}
