package dedupehttp_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

func ExampleWithReplay() {
	// Slack shows a slash command's answer to the user, so the Slack preset
	// replays it: a copy of the command gets the first answer, not an empty
	// 200, and the handler runs once.
	commands := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"response_type":"ephemeral","text":"Lease %s renewed."}`, r.FormValue("text"))
	})
	slack := platformtest.NewSigner("slack", "signing-secret") // signs as Slack does
	h := dedupehttp.New(dedupe.New(nil), platform.Slack.WithSecret(slack.Secret()), commands)

	cmd := []byte("command=%2Flease&text=L-42&trigger_id=13345224609.738474920.8088930838d88f008e0")
	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/slack/commands", bytes.NewReader(cmd))
		r.Header = slack.Sign(cmd, time.Now())
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d %q %s\n", w.Code, w.Header().Get(dedupehttp.HeaderVerdict), w.Body)
	}
	// Output:
	// 200 "" {"response_type":"ephemeral","text":"Lease L-42 renewed."}
	// 200 "replayed" {"response_type":"ephemeral","text":"Lease L-42 renewed."}
}
