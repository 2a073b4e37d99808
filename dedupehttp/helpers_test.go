package dedupehttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/require"
)

// update returns a Telegram update with update_id id.
func update(id int) []byte {
	return fmt.Appendf(nil, `{"update_id":%d,"message":{"message_id":5,"text":"hi"}}`, id)
}

// bigUpdate returns a Telegram update of about size bytes, with varied text.
func bigUpdate(id, size int) []byte {
	text := make([]byte, size)
	for i := range text {
		text[i] = "abcdefghijklmnopqrstuvwxyz0123456789 "[(i*7+i/37)%37]
	}
	b, err := json.Marshal(map[string]any{"update_id": id, "message": map[string]any{"text": string(text)}})
	if err != nil {
		panic(err)
	}
	return b
}

// serve starts a real HTTP server for h whose error log is discarded (a
// handler panic is logged there).
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// reply is what a client saw.
type reply struct {
	status  int
	verdict string
	header  http.Header
	body    string
	err     error
}

func post(srv *httptest.Server, body []byte) reply {
	resp, err := srv.Client().Post(srv.URL, "application/json", bytes.NewReader(body))
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, verdict: resp.Header.Get("X-Dedupe-Verdict"),
		header: resp.Header, body: string(b), err: err}
}

// record serves one request with body through h in memory.
func record(h http.Handler, ctx context.Context, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/hook", bytes.NewReader(body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// blockingStore is a store whose Claim waits for its context to be done.
type blockingStore struct {
	dedupe.Store
	entered chan struct{}
	ctxErr  chan error
}

func newBlockingStore() *blockingStore {
	return &blockingStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{}),
		entered: make(chan struct{}, 1), ctxErr: make(chan error, 1)}
}

func (s *blockingStore) Claim(ctx context.Context, _ dedupe.Claim, _ time.Duration) (dedupe.Status, error) {
	s.entered <- struct{}{}
	<-ctx.Done()
	s.ctxErr <- ctx.Err()
	return 0, ctx.Err()
}

// failingStore is a store in an outage.
type failingStore struct{ dedupe.Store }

func (failingStore) Claim(context.Context, dedupe.Claim, time.Duration) (dedupe.Status, error) {
	return 0, fmt.Errorf("connection refused")
}

// logBuffer collects JSON log records.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the records logged so far.
func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var recs []map[string]any
	for line := range strings.Lines(b.buf.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		recs = append(recs, rec)
	}
	return recs
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// quiet is a logger that discards.
var quiet = slog.New(slog.DiscardHandler)
