package dedupe_test

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gatewaykit/dedupe"
)

// A Slack retry carries the same event_id as the first delivery, so it gets
// the same key; Slack's URL verification is not a message.
func ExamplePreset_Extract() {
	body := []byte(`{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention","text":"hi"}}`)

	first, _ := dedupe.Slack.Extract(body, http.Header{})
	retry := http.Header{}
	retry.Set("X-Slack-Retry-Num", "1")
	retry.Set("X-Slack-Retry-Reason", "http_timeout")
	again, _ := dedupe.Slack.Extract(body, retry)
	fmt.Println(first, again, first == again, dedupe.Slack.TTL)

	_, err := dedupe.Slack.Extract([]byte(`{"type":"url_verification","challenge":"abc"}`), nil)
	fmt.Println(errors.Is(err, dedupe.ErrNotAMessage), err)
	// Output:
	// slack:Ev08MFMKH6 slack:Ev08MFMKH6 true 1h0m0s
	// true dedupe: not a message: slack url_verification
}

// Snowflakes stay exact, even when sent as JSON numbers.
func ExamplePreset_Extract_discord() {
	k, err := dedupe.Discord.Extract([]byte(`{"type":2,"id":1187654321098765432}`), nil)
	fmt.Println(k, err)
	// Output:
	// discord:1187654321098765432 <nil>
}

func ExamplePresets() {
	for _, p := range dedupe.Presets() {
		fmt.Printf("%-8s %v\n", p.Name, p.TTL)
	}
	// Output:
	// telegram 24h0m0s
	// slack    1h0m0s
	// feishu   12h0m0s
	// discord  1h0m0s
	// onebot   10m0s
	// qq       24h0m0s
}
