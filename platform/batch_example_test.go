package platform_test

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// LINE posts several events at once, and redelivers an event with its
// webhookEventId and isRedelivery true: Events keys each one, so the
// redelivered event has the key of its first delivery. MessageID cannot key
// such a body as one message.
func Example_batches() {
	line := platform.LINE.WithSecret("channel-secret")
	s := platformtest.NewSigner("line", "channel-secret") // signs as LINE does
	body := []byte(`{"destination":"U1","events":[
		{"type":"message","webhookEventId":"01FZ74A0TDDPYRVKNK77XKC3ZR","deliveryContext":{"isRedelivery":false},"message":{"type":"text","id":"1","text":"hi"}},
		{"type":"follow","webhookEventId":"01FZ74ASS536FW97EX38NKCZQK","deliveryContext":{"isRedelivery":true}}]}`)

	verified, err := line.Verify(body, s.Sign(body, time.Now()), time.Now())
	fmt.Println(err)
	evs, _ := line.Events(verified, nil)
	for _, e := range evs {
		fmt.Println(e.Key(line))
	}
	_, err = line.Extract(verified, nil)
	fmt.Println(errors.Is(err, dedupe.ErrNoMessageID))
	// Output:
	// <nil>
	// line:01FZ74A0TDDPYRVKNK77XKC3ZR
	// line:01FZ74ASS536FW97EX38NKCZQK
	// true
}

// Meta checks a webhook URL with an unsigned GET: the preset echoes the
// challenge only for the Verify Token of the App Dashboard.
func ExamplePreset_AnswerSubscription() {
	meta := platform.Meta.WithSecret("app-secret").WithVerifyToken("meatyhamhock")

	q, _ := url.ParseQuery("hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock")
	challenge, ok := meta.AnswerSubscription(q) // answer 200, text/plain
	fmt.Println(string(challenge), ok)

	q.Set("hub.verify_token", "guess")
	_, ok = meta.AnswerSubscription(q) // answer 403
	fmt.Println(ok)
	// Output:
	// 1158201444 true
	// false
}
