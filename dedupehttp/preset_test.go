package dedupehttp_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
)

// TestFromPresetKeepsTheSecret checks that a preset given its secret is
// never served unauthenticated, whichever constructor takes it: a forgery to
// Middleware or NewAsync with FromPreset(preset with a secret) gets 401 over
// a real server and touches neither the store nor the handler (before, both
// served it), and the real delivery is processed.
func TestFromPresetKeepsTheSecret(t *testing.T) {
	tg := platform.Telegram.WithSecret("s3cret-token")
	for _, tc := range []struct {
		name string
		make func(d *dedupe.Deduper, h http.Handler, opts ...dedupehttp.Option) http.Handler
	}{
		{"Middleware", func(d *dedupe.Deduper, h http.Handler, opts ...dedupehttp.Option) http.Handler {
			return dedupehttp.Middleware(d, dedupehttp.FromPreset(tg), opts...)(h)
		}},
		{"NewAsync", func(d *dedupe.Deduper, h http.Handler, opts ...dedupehttp.Option) http.Handler {
			aopts := make([]dedupehttp.AsyncOption, len(opts))
			for i, o := range opts {
				aopts[i] = o
			}
			a := dedupehttp.NewAsync(d, dedupehttp.FromPreset(tg), h, aopts...)
			t.Cleanup(func() { _ = a.Close(t.Context()) })
			return a
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newRecordingStore()
			var runs atomic.Int64
			var logs logBuffer
			srv := serve(t, tc.make(dedupe.New(store), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				runs.Add(1)
			}), dedupehttp.WithLogger(logs.logger())))
			for _, rec := range logs.records(t) {
				assert.NotEqual(t, "WARN", rec["level"], "no warning at construction: %v", rec["msg"])
			}

			for range 100 {
				r := post(srv, update(9))
				assert.Equal(t, http.StatusUnauthorized, r.status)
				assert.Equal(t, "unauthenticated", r.verdict)
			}
			assert.Zero(t, store.writes.Load(), "the forgeries touched the store")
			assert.Zero(t, runs.Load(), "the forgeries reached the handler")

			req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(update(9))))
			require.NoError(t, err)
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret-token")
			resp, err := srv.Client().Do(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			assert.Less(t, resp.StatusCode, 300, "Telegram's delivery")
		})
	}
}

// TestFromPresetWithoutSecret checks that only a preset without a secret
// runs unauthenticated, with the warning; that a WithVerify takes
// precedence over the preset FromPreset keeps; and that a custom Extractor
// is never called to find out.
func TestFromPresetWithoutSecret(t *testing.T) {
	var logs logBuffer
	d := dedupe.New(nil)
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	open := dedupehttp.Middleware(d, dedupehttp.FromPreset(platform.Telegram), dedupehttp.WithLogger(logs.logger()))(ok)
	assert.Equal(t, http.StatusOK, deliver(open, update(1), nil).Code, "served unauthenticated")
	recs := logs.records(t)
	require.Len(t, recs, 1)
	assert.Equal(t, "WARN", recs[0]["level"])
	assert.Contains(t, recs[0]["msg"], "the preset has no secret")
	assert.Equal(t, "telegram", recs[0]["platform"])

	other := platform.Telegram.WithSecret("other-token")
	h := dedupehttp.Middleware(d, dedupehttp.FromPreset(platform.Telegram.WithSecret("s3cret-token")),
		dedupehttp.WithVerify(other), dedupehttp.WithLogger(quiet))(ok)
	assert.Equal(t, http.StatusUnauthorized, deliver(h, update(2), http.Header{"X-Telegram-Bot-Api-Secret-Token": {"s3cret-token"}}).Code)
	assert.Equal(t, http.StatusOK, deliver(h, update(2), http.Header{"X-Telegram-Bot-Api-Secret-Token": {"other-token"}}).Code)

	var calls atomic.Int64
	custom := dedupehttp.Extractor(func(r *http.Request) (dedupe.Key, error) {
		calls.Add(1)
		return dedupehttp.FromPreset(platform.Telegram.WithSecret("s3cret-token"))(r)
	})
	wrapped := dedupehttp.Middleware(d, custom, dedupehttp.WithLogger(quiet))(ok)
	assert.Zero(t, calls.Load(), "a custom Extractor is not called when the middleware is built")
	assert.Equal(t, http.StatusOK, deliver(wrapped, update(3), nil).Code, "a wrapper is a custom Extractor: unauthenticated")
	assert.EqualValues(t, 1, calls.Load())
}
