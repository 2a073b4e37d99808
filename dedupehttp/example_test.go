package dedupehttp_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
)

func ExampleMiddleware() {
	d := dedupe.New(nil, dedupe.WithTTL(platform.Telegram.TTL)) // a memory store
	mw := dedupehttp.Middleware(d, dedupehttp.FromPreset(platform.Telegram))
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("handler: %s\n", body)
	}))

	// Telegram delivers update 1001, then redelivers it.
	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(`{"update_id":1001}`))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d verdict=%q\n", w.Code, w.Header().Get(dedupehttp.HeaderVerdict))
	}
	// Output:
	// handler: {"update_id":1001}
	// 200 verdict=""
	// 200 verdict="duplicate"
}

func ExampleWithInFlight() {
	// Ask the platform to retry a copy that arrives while the first is being
	// processed ten seconds later, rather than after the default Retry-After.
	retryLater := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "10")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	d := dedupe.New(nil)
	mw := dedupehttp.Middleware(d, dedupehttp.FromPreset(platform.Slack), dedupehttp.WithInFlight(retryLater))

	entered, release := make(chan struct{}), make(chan struct{})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	}))
	event := `{"type":"event_callback","event_id":"Ev0PV52K21","event":{"type":"message"}}`
	first := make(chan int)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/slack", strings.NewReader(event)))
		first <- w.Code
	}()
	<-entered
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/slack", strings.NewReader(event)))
	fmt.Println("copy:", w.Code, w.Header().Get("Retry-After"))
	close(release)
	fmt.Println("first:", <-first)
	// Output:
	// copy: 503 10
	// first: 200
}

func ExampleNewAsync() {
	d := dedupe.New(nil)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("processing %s\n", body) // a slow AI turn, say
	})
	processed := make(chan error, 1)
	a := dedupehttp.NewAsync(d, dedupehttp.FromPreset(platform.Telegram), handler,
		dedupehttp.WithWorkers(4),
		dedupehttp.WithQueueSize(64),
		dedupehttp.WithDone(func(_ context.Context, _ dedupe.Key, err error) { processed <- err }),
	)

	deliver := func() {
		r := httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(`{"update_id":7}`))
		w := httptest.NewRecorder()
		a.ServeHTTP(w, r)
		fmt.Printf("%d verdict=%s queued=%t\n", w.Code, w.Header().Get(dedupehttp.HeaderVerdict),
			w.Header().Get(dedupehttp.HeaderQueueID) != "")
	}
	deliver()
	fmt.Println("done:", <-processed)
	deliver() // a redelivery

	// After http.Server.Shutdown: wait up to 10 s for queued work.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println("close:", a.Close(ctx))
	// Unordered output:
	// 202 verdict=queued queued=true
	// processing {"update_id":7}
	// done: <nil>
	// 200 verdict=duplicate queued=false
	// close: <nil>
}

// One Deduper serves every platform; each endpoint authenticates with its
// platform's secret and marks with its preset's TTL. A forged delivery is
// refused before it reaches the store, so the real one is still processed.
func ExampleNew() {
	d := dedupe.New(nil)                               // a memory store
	tg := platform.Telegram.WithSecret("s3cret-token") // the secret_token given to setWebhook
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, verdict := dedupehttp.KeyFrom(r.Context())
		fmt.Println("handler:", key, verdict)
	})
	h := dedupehttp.New(d, tg, handler, dedupehttp.WithLogger(slog.New(slog.DiscardHandler)))

	deliver := func(secret string) {
		r := httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(`{"update_id":5001}`))
		r.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d verdict=%q\n", w.Code, w.Header().Get(dedupehttp.HeaderVerdict))
	}
	deliver("guess")        // a forgery
	deliver("s3cret-token") // Telegram
	deliver("s3cret-token") // Telegram's redelivery
	fmt.Printf("%+v\n", h.Stats())
	// Output:
	// 401 verdict="unauthenticated"
	// handler: telegram:5001 new
	// 200 verdict=""
	// 200 verdict="duplicate"
	// {Unauthenticated:1 Undeduplicated:0 Protocol:0 Malformed:0 PanicsAfterSuccess:0 Forbidden:0 ReplayTooLarge:0}
}

// LINE posts several events at once, and redelivers a batch whose answer
// was not 200. Events runs the handler once per new event: a redelivery
// runs only the event that failed.
func ExampleEvents() {
	const channelSecret = "line-channel-secret"
	d := dedupe.New(nil) // a memory store
	line := platform.LINE.WithSecret(channelSecret)
	failOnce := true
	h := dedupehttp.Events(d, line, func(r *http.Request, ev platform.Event) error {
		fmt.Println("event", ev.ID)
		if ev.ID == "01FZ74ASS536FW97EX38NKCZQK" && failOnce {
			failOnce = false
			return errors.New("reply API unavailable")
		}
		return nil
	}, dedupehttp.WithLogger(slog.New(slog.DiscardHandler)))

	body := `{"destination":"U0","events":[` +
		`{"type":"message","webhookEventId":"01FZ74A0TDDPYRVKNK77XKC3ZR","message":{"type":"text","text":"hi"}},` +
		`{"type":"follow","webhookEventId":"01FZ74ASS536FW97EX38NKCZQK"}]}`
	mac := hmac.New(sha256.New, []byte(channelSecret)) // as LINE signs
	mac.Write([]byte(body))
	for range 3 { // the delivery, LINE's redelivery, and one more
		r := httptest.NewRequest(http.MethodPost, "/line", strings.NewReader(body))
		r.Header.Set("X-Line-Signature", base64.StdEncoding.EncodeToString(mac.Sum(nil)))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d verdict=%q\n", w.Code, w.Header().Get(dedupehttp.HeaderVerdict))
	}
	// Output:
	// event 01FZ74A0TDDPYRVKNK77XKC3ZR
	// event 01FZ74ASS536FW97EX38NKCZQK
	// 500 verdict="failed"
	// event 01FZ74ASS536FW97EX38NKCZQK
	// 200 verdict=""
	// 200 verdict="duplicate"
}
