package dedupehttp_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
)

// reusableBody is a request body the benchmarks rewind instead of allocating.
type reusableBody struct{ bytes.Reader }

func (*reusableBody) Close() error { return nil }

// bench serves b.N Telegram updates through h, in memory. The update_id is
// id(i) for the i-th request; header, if any, is sent with each.
func bench(b *testing.B, h http.Handler, id func(i int) int, header ...string) {
	var body reusableBody
	buf := make([]byte, 0, 128)
	r := httptest.NewRequest(http.MethodPost, "/telegram", &body)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		buf = append(buf[:0], `{"update_id":`...)
		buf = strconv.AppendInt(buf, int64(id(i)), 10)
		buf = append(buf, `,"message":{"message_id":5,"chat":{"id":42},"text":"hello there"}}`...)
		body.Reset(buf)
		r.ContentLength = int64(len(buf))
		h.ServeHTTP(w, r)
	}
	b.StopTimer()
	if w.Code != http.StatusOK {
		b.Fatalf("status %d", w.Code)
	}
}

// BenchmarkMiddleware compares the middleware around a trivial handler with
// the bare handler (the baseline) and with the handler extracting the key
// itself, without deduplication.
func BenchmarkMiddleware(b *testing.B) {
	trivial := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})
	extracting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if _, err := platform.Telegram.Extract(body, r.Header); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	fresh := func(i int) int { return i + 1 }
	same := func(int) int { return 1 }

	b.Run("baseline=bare", func(b *testing.B) { bench(b, trivial, fresh) })
	b.Run("baseline=bare+extract", func(b *testing.B) { bench(b, extracting, fresh) })
	b.Run("middleware/new", func(b *testing.B) {
		h := dedupehttp.Middleware(dedupe.New(nil), dedupehttp.FromPreset(platform.Telegram), dedupehttp.WithLogger(quiet))(trivial)
		bench(b, h, fresh)
	})
	b.Run("middleware/duplicate", func(b *testing.B) {
		h := dedupehttp.Middleware(dedupe.New(nil), dedupehttp.FromPreset(platform.Telegram), dedupehttp.WithLogger(quiet))(trivial)
		bench(b, h, same)
	})
	// New authenticates each update with the preset's secret first.
	secret := []string{"X-Telegram-Bot-Api-Secret-Token", "s3cret"}
	tg := platform.Telegram.WithSecret("s3cret")
	b.Run("new+secret/new", func(b *testing.B) {
		bench(b, dedupehttp.New(dedupe.New(nil), tg, trivial, dedupehttp.WithLogger(quiet)), fresh, secret...)
	})
	b.Run("new+secret/duplicate", func(b *testing.B) {
		bench(b, dedupehttp.New(dedupe.New(nil), tg, trivial, dedupehttp.WithLogger(quiet)), same, secret...)
	})
}

// TestDuplicateAllocs bounds the allocations the middleware itself makes to
// answer a duplicate (the extractor here makes none): the request's shallow
// copy, the body buffer and its reader, the handler's ResponseWriter and the
// verdict header.
func TestDuplicateAllocs(t *testing.T) {
	key := dedupe.Key{Channel: "test", MessageID: "1"}
	extract := func(*http.Request) (dedupe.Key, error) { return key, nil }
	h := dedupehttp.Middleware(dedupe.New(nil), extract, dedupehttp.WithLogger(quiet))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var body reusableBody
	r := httptest.NewRequest(http.MethodPost, "/", &body)
	w := httptest.NewRecorder()
	payload := update(1)
	r.ContentLength = int64(len(payload))
	body.Reset(payload)
	h.ServeHTTP(w, r) // processed
	allocs := testing.AllocsPerRun(1000, func() {
		body.Reset(payload)
		h.ServeHTTP(w, r)
	})
	require.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict), "verdict")
	assert.LessOrEqual(t, allocs, 5.0, "allocs to answer a duplicate")
}

// BenchmarkReplay compares a duplicate answered with the first answer kept
// by WithReplay against the plain duplicate answer (the baseline), and a new
// message whose answer is recorded and kept against one whose is not. The
// handler answers a 160-byte JSON body, as a Slack or Discord handler would;
// "empty" is a handler that answers an empty 200 (an Events API handler
// behind a preset with Replay), whose answer is not kept. The endpoints
// authenticate nothing, hence WithReplayUnauthenticated.
func BenchmarkReplay(b *testing.B) {
	answer := []byte(`{"type":4,"data":{"content":"A lease is a claim on a message that runs out, so that a crashed worker does not hold it for ever.","flags":64}}`)
	answering := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	})
	endpoint := func(opts ...dedupehttp.Option) http.Handler {
		opts = append(opts, dedupehttp.WithReplayUnauthenticated(), dedupehttp.WithLogger(quiet))
		return dedupehttp.Middleware(dedupe.New(nil), dedupehttp.FromPreset(platform.Telegram), opts...)(answering)
	}
	fresh := func(i int) int { return i + 1 }
	same := func(int) int { return 1 }
	b.Run("baseline=duplicate", func(b *testing.B) { bench(b, endpoint(), same) })
	b.Run("duplicate/replayed", func(b *testing.B) { bench(b, endpoint(dedupehttp.WithReplay()), same) })
	b.Run("duplicate/empty", func(b *testing.B) {
		h := dedupehttp.Middleware(dedupe.New(nil), dedupehttp.FromPreset(platform.Telegram),
			dedupehttp.WithReplay(), dedupehttp.WithReplayUnauthenticated(), dedupehttp.WithLogger(quiet))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		bench(b, h, same)
	})
	b.Run("baseline=new", func(b *testing.B) { bench(b, endpoint(), fresh) })
	b.Run("new/kept", func(b *testing.B) { bench(b, endpoint(dedupehttp.WithReplay()), fresh) })
}
