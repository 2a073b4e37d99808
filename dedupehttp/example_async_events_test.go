package dedupehttp_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/queue"
)

// LINE waits two seconds for its answer; an AI turn takes longer.
// NewAsyncEvents answers a batch once each of its events is in the queue,
// and runs the handler on each event in the background; LINE's
// redelivery of the batch pushes nothing again.
func ExampleNewAsyncEvents() {
	const channelSecret = "line-channel-secret"
	line := platform.LINE.WithSecret(channelSecret)
	q := queue.NewMemory(queue.MemoryConfig{}) // queue.OpenSQLite survives a crash
	defer q.Close()
	done := make(chan dedupe.Key, 2)
	a := dedupehttp.NewAsyncEvents(dedupe.New(nil), line, func(r *http.Request, ev platform.Event) error {
		return nil // a slow AI turn, say
	}, q, dedupehttp.WithDone(func(_ context.Context, k dedupe.Key, _ error) { done <- k }))

	body := `{"destination":"U0","events":[` +
		`{"type":"message","webhookEventId":"01FZ74A0TDDPYRVKNK77XKC3ZR","message":{"type":"text","text":"hi"}},` +
		`{"type":"follow","webhookEventId":"01FZ74ASS536FW97EX38NKCZQK"}]}`
	mac := hmac.New(sha256.New, []byte(channelSecret)) // as LINE signs
	mac.Write([]byte(body))
	deliver := func() {
		r := httptest.NewRequest(http.MethodPost, "/line", strings.NewReader(body))
		r.Header.Set("X-Line-Signature", base64.StdEncoding.EncodeToString(mac.Sum(nil)))
		w := httptest.NewRecorder()
		a.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get(dedupehttp.HeaderVerdict), w.Body.String())
	}
	deliver()
	ids := []string{(<-done).MessageID, (<-done).MessageID}
	slices.Sort(ids)
	fmt.Println("processed", ids)
	deliver() // LINE redelivers
	_ = a.Close(context.Background())
	// Output:
	// 200 queued {}
	// processed [01FZ74A0TDDPYRVKNK77XKC3ZR 01FZ74ASS536FW97EX38NKCZQK]
	// 200 duplicate {}
}
