package dedupehttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe/queue"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
)

func ExampleWithQueue() {
	dir, err := os.MkdirTemp("", "dedupe-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	// The marks and the accepted messages in one SQLite file: a message
	// answered 202 survives a crash of the process.
	path := filepath.Join(dir, "gateway.db")
	store, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	q, err := queue.OpenSQLite(path, queue.SQLiteConfig{})
	if err != nil {
		panic(err)
	}
	defer q.Close()

	tg := platform.Telegram.WithSecret("s3cret")
	settled := make(chan error, 1)
	a := dedupehttp.NewAsync(dedupe.New(store), dedupehttp.FromPreset(tg),
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			fmt.Printf("handler: %s\n", body) // a slow AI turn, say
		}),
		dedupehttp.WithVerify(tg), dedupehttp.WithQueue(q),
		dedupehttp.WithDone(func(_ context.Context, _ dedupe.Key, err error) { settled <- err }))
	mux := http.NewServeMux()
	mux.Handle("POST /telegram", a)
	mux.Handle("GET /queue/{id}", a.StatusHandler())

	deliver := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(`{"update_id":1001}`))
		r.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	w := deliver()
	fmt.Println(w.Code, w.Header().Get(dedupehttp.HeaderVerdict))
	<-settled

	s := httptest.NewRecorder()
	mux.ServeHTTP(s, httptest.NewRequest(http.MethodGet, "/queue/"+w.Header().Get(dedupehttp.HeaderQueueID), nil))
	var status struct{ State string }
	_ = json.Unmarshal(s.Body.Bytes(), &status)
	fmt.Println("status:", status.State)

	w = deliver() // Telegram redelivers
	fmt.Println(w.Code, w.Header().Get(dedupehttp.HeaderVerdict))
	_ = a.Close(context.Background())
	// Output:
	// 202 queued
	// handler: {"update_id":1001}
	// status: done
	// 200 duplicate
}

// A queued handler runs under a deadline: here 50 ms, and by default nine
// tenths of the queue's visibility timeout. Its context is then cancelled
// with ErrHandlerTimeout; a handler that stops has failed that attempt, and
// on the last attempt the message becomes a dead letter with the reason.
func ExampleWithHandlerTimeout() {
	q := queue.NewMemory(queue.MemoryConfig{})
	defer q.Close()
	tg := platform.Telegram.WithSecret("s3cret")
	settled := make(chan error, 1)
	a := dedupehttp.NewAsync(dedupe.New(nil), dedupehttp.FromPreset(tg),
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // a call that hangs, but honours its context
		}),
		dedupehttp.WithVerify(tg), dedupehttp.WithQueue(q),
		dedupehttp.WithHandlerTimeout(50*time.Millisecond), dedupehttp.WithMaxAttempts(1),
		dedupehttp.WithLogger(slog.New(slog.DiscardHandler)),
		dedupehttp.WithDone(func(_ context.Context, _ dedupe.Key, err error) { settled <- err }))

	r := httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(`{"update_id":1002}`))
	r.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret")
	w := httptest.NewRecorder()
	a.ServeHTTP(w, r)
	fmt.Println(w.Code, w.Header().Get(dedupehttp.HeaderVerdict))
	err := <-settled
	fmt.Println(errors.Is(err, dedupehttp.ErrHandlerTimeout))

	dead, _ := a.Queue().Failed(context.Background(), 10)
	fmt.Println(len(dead), dead[0].State)
	_ = a.Close(context.Background())
	// Output:
	// 202 queued
	// true
	// 1 failed
}
