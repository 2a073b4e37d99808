package dedupeslack_test

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupeslack"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

func ExampleEventsAPI() {
	d := dedupe.New(nil) // a memory store; Redis or PostgreSQL for several replicas
	handle := dedupeslack.EventsAPI(d, "slack", func(ctx context.Context, ev slackevents.EventsAPIEvent) error {
		if m, ok := ev.InnerEvent.Data.(*slackevents.MessageEvent); ok {
			fmt.Println("handled message", m.Text)
		}
		return nil
	})

	body := `{"type": "event_callback", "event_id": "Ev0PV52K21", "team_id": "T1", "api_app_id": "A1",
		"event": {"type": "message", "channel": "C1", "user": "U1", "text": "hi", "ts": "1.000001"}}`
	for range 2 { // the delivery and Slack's retry of it
		ev, err := slackevents.ParseEvent([]byte(body), slackevents.OptionNoVerifyToken())
		if err != nil {
			panic(err)
		}
		fmt.Println(handle(context.Background(), ev))
	}
	// Output:
	// handled message hi
	// <nil>
	// <nil>
}

// An Events API endpoint: verify the signature, parse, answer the URL
// verification, and answer with StatusCode: 500 when the event was not
// processed and 503 for a retry whose first delivery is still running, so
// that Slack retries it.
func ExampleEventsAPI_server() {
	signingSecret := "…"
	d := dedupe.New(nil)
	handle := dedupeslack.EventsAPI(d, "slack", func(ctx context.Context, ev slackevents.EventsAPIEvent) error {
		return nil // process the event
	})
	http.HandleFunc("POST /slack/events", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		sv, err := slack.NewSecretsVerifier(r.Header, signingSecret)
		if err == nil {
			_, _ = sv.Write(body)
			err = sv.Ensure()
		}
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		ev, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if ev.Type == slackevents.URLVerification {
			v := ev.Data.(*slackevents.EventsAPIURLVerificationEvent)
			_, _ = io.WriteString(w, v.Challenge)
			return
		}
		w.WriteHeader(dedupeslack.StatusCode(handle(r.Context(), ev)))
	})
}

func ExampleSocketMode() {
	api := slack.New("xoxb-…", slack.OptionAppLevelToken("xapp-…"))
	client := socketmode.New(api)
	d := dedupe.New(nil)

	h := socketmode.NewSocketmodeHandler(client)
	h.HandleEvents(slackevents.AppMention, dedupeslack.SocketMode(d, "slack",
		func(evt *socketmode.Event, client *socketmode.Client) error {
			ev := evt.Data.(slackevents.EventsAPIEvent)
			mention := ev.InnerEvent.Data.(*slackevents.AppMentionEvent)
			_, _, err := client.PostMessage(mention.Channel, slack.MsgOptionText("hello", false))
			return err // an error leaves the envelope unacknowledged: Slack retries
		}))
	_ = h.RunEventLoopContext(context.Background())
}
