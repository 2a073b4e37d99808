package deduperedis_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// TestQueueAsyncEvents accepts the LINE and WhatsApp batches of
// platform/testdata with dedupehttp.NewAsyncEvents on a Redis stream and a
// Redis store: each batch is answered 200 once its events are queued, each
// event runs once, and the redelivered batch is a duplicate.
func TestQueueAsyncEvents(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	for name, c := range map[string]struct {
		signer string
		preset platform.Preset
		file   string
	}{
		"line":     {"line", platform.LINE, "line_events.json"},
		"whatsapp": {"meta", platform.Meta, "meta_whatsapp.json"},
	} {
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("..", "platform", "testdata", c.file))
			require.NoError(t, err)
			s := platformtest.NewSigner(c.signer, "redis-events-secret")
			p := s.Preset(c.preset)
			evs, err := p.Events(body, nil)
			require.NoError(t, err)
			prefix := "dedupe-test:events:" + randomID(t)
			q := newQueue(t, client, deduperedis.QueueConfig{Name: prefix + ":queue", PollInterval: 20 * time.Millisecond})
			store, err := deduperedis.New(client, deduperedis.Config{Prefix: prefix + ":"})
			require.NoError(t, err)
			t.Cleanup(func() { dropKeys(client, prefix+":*") })
			var mu sync.Mutex
			runs := map[string]int{}
			done := make(chan error, len(evs))
			a := dedupehttp.NewAsyncEvents(dedupe.New(store), p, func(_ *http.Request, ev platform.Event) error {
				mu.Lock()
				runs[ev.ID]++
				mu.Unlock()
				return nil
			}, q, dedupehttp.WithDone(func(_ context.Context, _ dedupe.Key, err error) { done <- err }))
			post := func() *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
				for k, v := range s.Sign(body, time.Now()) {
					r.Header[k] = v
				}
				w := httptest.NewRecorder()
				a.ServeHTTP(w, r)
				return w
			}
			w := post()
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Equal(t, "queued", w.Header().Get(dedupehttp.HeaderVerdict))
			for range evs {
				select {
				case err := <-done:
					require.NoError(t, err)
				case <-time.After(time.Minute):
					t.Fatal("events not processed within a minute")
				}
			}
			w = post()
			assert.Equal(t, http.StatusOK, w.Code)
			assert.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict))
			require.NoError(t, a.Close(t.Context()))
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, runs, len(evs))
			for id, n := range runs {
				assert.Equal(t, 1, n, "runs of %s", id)
			}
		})
	}
}
