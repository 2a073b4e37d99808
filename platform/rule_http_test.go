package platform_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// ruleSource is a sender of a rule-built preset, for the HTTP tests: how it
// signs a delivery of body under id at a time, and a forged copy.
type ruleSource struct {
	name    string
	preset  platform.Preset
	body    []byte
	deliver func(id string, at time.Time) (body []byte, h http.Header)
	forge   func(id string, at time.Time) (body []byte, h http.Header)
	window  time.Duration // the signed timestamp's tolerance, 0 when none is signed
}

func ruleSources(t *testing.T) []ruleSource {
	sw := platformtest.NewSigner("webhooks", "the-endpoint-secret")
	swa := platformtest.NewSigner("webhooks-v1a", "sender-key")
	gh := platformtest.NewSigner("github", "the-github-hook-secret")
	st := platformtest.NewSigner("stripe", "whsec_the-endpoint-secret")
	swBody, ghBody, stBody := fixture(t, "webhooks_contact_created.json"), fixture(t, "github_ping.json"), fixture(t, "stripe_event.json")
	other := func(name string) *platformtest.Signer { return platformtest.NewSigner(name, "forger") }
	stripeBody := func(id string) []byte {
		return bytes.Replace(stBody, []byte("evt_1NG8Du2eZvKYlo2CUI79vXWy"), []byte(id), 1)
	}
	return []ruleSource{
		{"webhooks v1", sw.Preset(platform.StandardWebhooks), swBody,
			func(id string, at time.Time) ([]byte, http.Header) { return swBody, sw.SignID(id, swBody, at) },
			func(id string, at time.Time) ([]byte, http.Header) {
				return swBody, other("webhooks").SignID(id, swBody, at)
			}, 5 * time.Minute},
		{"webhooks v1a", swa.Preset(platform.StandardWebhooks), swBody,
			func(id string, at time.Time) ([]byte, http.Header) { return swBody, swa.SignID(id, swBody, at) },
			func(id string, at time.Time) ([]byte, http.Header) {
				return swBody, other("webhooks-v1a").SignID(id, swBody, at)
			}, 5 * time.Minute},
		{"github", gh.Preset(platform.GitHub), ghBody,
			func(id string, at time.Time) ([]byte, http.Header) { return ghBody, gh.SignID(id, ghBody, at) },
			func(id string, at time.Time) ([]byte, http.Header) {
				return ghBody, other("github").SignID(id, ghBody, at)
			}, 0},
		{"stripe", st.Preset(platform.Stripe), stBody,
			func(id string, at time.Time) ([]byte, http.Header) {
				return stripeBody(id), st.Sign(stripeBody(id), at)
			},
			func(id string, at time.Time) ([]byte, http.Header) {
				return stripeBody(id), other("stripe").Sign(stripeBody(id), at)
			}, 300 * time.Second},
	}
}

func post(h http.Handler, body []byte, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestRulePresetsOverHTTP serves each rule-built preset with
// dedupehttp.New on a SQLite store: 1,000 forged deliveries get 401 and
// touch no store (the authentic delivery of their id is processed
// afterwards, the handler never ran before it); the
// delivery, its retry (signed anew, later) and a replay of the same request
// within the tolerance are processed once; a replay after it gets 401.
func TestRulePresetsOverHTTP(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	for _, src := range ruleSources(t) {
		t.Run(src.name, func(t *testing.T) {
			st, err := dedupe.OpenSQLite(filepath.Join(t.TempDir(), "d.db"), dedupe.SQLiteConfig{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			clock := now
			var calls atomic.Int32
			h := dedupehttp.New(dedupe.New(st, dedupe.WithLogger(quiet)), src.preset,
				http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }),
				dedupehttp.WithClock(func() time.Time { return clock }), dedupehttp.WithLogger(quiet))
			const id = "evt_http_1"

			for i := 0; i < 1000; i++ { // forgeries, of the id to come among others
				fb, fh := src.forge([]string{id, "evt_forged_" + strconv.Itoa(i)}[i%2], now)
				w := post(h, fb, fh)
				require.Equal(t, http.StatusUnauthorized, w.Code)
			}
			assert.EqualValues(t, 1000, h.Stats().Unauthenticated)
			body, first := src.deliver(id, now)
			w := post(h, body, first)
			require.Equal(t, http.StatusOK, w.Code, w.Header().Get(dedupehttp.HeaderVerdict))
			assert.EqualValues(t, 1, calls.Load(), "the forgeries stored nothing")

			retryAt := now.Add(time.Minute)
			clock = retryAt
			body, retry := src.deliver(id, retryAt)
			for _, hdr := range []http.Header{retry, first} { // a retry, and a replay within the tolerance
				w = post(h, body, hdr)
				assert.Equal(t, http.StatusOK, w.Code)
				assert.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict))
			}
			if src.window > 0 {
				clock = now.Add(src.window + time.Second)
				w = post(h, body, first)
				assert.Equal(t, http.StatusUnauthorized, w.Code, "a replay after the tolerance")
			}
			assert.EqualValues(t, 1, calls.Load())
		})
	}
}

// TestRulePresetsAsync serves each rule-built preset with
// dedupehttp.NewAsync: a delivery is queued and processed once, its retry
// is a duplicate, a forgery gets 401.
func TestRulePresetsAsync(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	for _, src := range ruleSources(t) {
		t.Run(src.name, func(t *testing.T) {
			done := make(chan error, 4)
			var calls atomic.Int32
			a := dedupehttp.NewAsync(dedupe.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), dedupe.WithLogger(quiet)),
				dedupehttp.FromPreset(src.preset),
				http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }),
				dedupehttp.WithClock(func() time.Time { return now }), dedupehttp.WithLogger(quiet),
				dedupehttp.WithDone(func(_ context.Context, _ dedupe.Key, err error) { done <- err }))
			t.Cleanup(func() { _ = a.Close(context.Background()) })

			fb, fh := src.forge("evt_async", now)
			w := post(a, fb, fh)
			assert.Equal(t, http.StatusUnauthorized, w.Code)
			body, h := src.deliver("evt_async", now)
			w = post(a, body, h)
			require.Equal(t, http.StatusAccepted, w.Code, w.Header().Get(dedupehttp.HeaderVerdict))
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Fatal("the queued delivery was not processed")
			}
			body, h = src.deliver("evt_async", now.Add(time.Second))
			w = post(a, body, h)
			assert.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict))
			assert.EqualValues(t, 1, calls.Load())
		})
	}
}
