package dedupehttp_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
)

// BenchmarkEvents serves LINE batches of 64 new events through Events
// (impl=events), beside its baseline: the same 64 events as 64 deliveries
// of one event each through New (impl=new), on a memory and a SQLite store.
// One op is one batch of 64 events, either way.
func BenchmarkEvents(b *testing.B) {
	const n = 64
	stores := map[string]func(b *testing.B) dedupe.Store{
		"memory": func(*testing.B) dedupe.Store { return dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 1 << 22}) },
		"sqlite": func(b *testing.B) dedupe.Store {
			st, err := dedupe.OpenSQLite(filepath.Join(b.TempDir(), "dedupe.db"), dedupe.SQLiteConfig{})
			require.NoError(b, err)
			b.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
	event := func(batch, i int) string {
		return fmt.Sprintf(`{"type":"message","webhookEventId":"01B%08dE%02d","message":{"type":"text","text":"hello there"}}`, batch, i)
	}
	p := linePreset()
	serve := func(b *testing.B, h http.Handler, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/line", bytes.NewReader(body))
		sign(r, body, eventsSecret)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	for name, open := range stores {
		b.Run("store="+name+"/impl=events", func(b *testing.B) {
			h := dedupehttp.Events(dedupe.New(open(b)), p, func(*http.Request, platform.Event) error { return nil },
				dedupehttp.WithLogger(quiet))
			b.ReportAllocs()
			for k := range b.N {
				var body bytes.Buffer
				body.WriteString(`{"destination":"U0","events":[`)
				for i := range n {
					if i > 0 {
						body.WriteByte(',')
					}
					body.WriteString(event(k, i))
				}
				body.WriteString(`]}`)
				serve(b, h, body.Bytes())
			}
		})
		b.Run("store="+name+"/impl=new", func(b *testing.B) {
			h := dedupehttp.New(dedupe.New(open(b)), p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
			}), dedupehttp.WithLogger(quiet))
			b.ReportAllocs()
			for k := range b.N {
				for i := range n {
					serve(b, h, []byte(`{"destination":"U0","events":[`+event(k, i)+`]}`))
				}
			}
		})
	}
}
