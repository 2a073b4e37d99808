package platform_test

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gatewaykit/dedupe/platform"
)

// A Slack retry carries the same event_id as the first delivery, so it gets
// the same key; Slack's URL verification is not a message.
func ExamplePreset_Extract() {
	body := []byte(`{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention","text":"hi"}}`)

	first, _ := platform.Slack.Extract(body, http.Header{})
	retry := http.Header{}
	retry.Set("X-Slack-Retry-Num", "1")
	retry.Set("X-Slack-Retry-Reason", "http_timeout")
	again, _ := platform.Slack.Extract(body, retry)
	fmt.Println(first, again, first == again, platform.Slack.TTL)

	_, err := platform.Slack.Extract([]byte(`{"type":"url_verification","challenge":"abc"}`), nil)
	fmt.Println(errors.Is(err, platform.ErrNotAMessage), err)
	// Output:
	// slack:Ev08MFMKH6 slack:Ev08MFMKH6 true 1h0m0s
	// true dedupe: platform: not a message: slack url_verification
}

// Snowflakes stay exact, even when sent as JSON numbers.
func ExamplePreset_Extract_discord() {
	k, err := platform.Discord.Extract([]byte(`{"type":2,"id":1187654321098765432}`), nil)
	fmt.Println(k, err)
	// Output:
	// discord:1187654321098765432 <nil>
}

func ExamplePresets() {
	for _, p := range platform.Presets() {
		fmt.Printf("%-8s %v\n", p.Name, p.TTL)
	}
	// Output:
	// telegram 24h0m0s
	// slack    1h0m0s
	// feishu   12h0m0s
	// discord  1h0m0s
	// onebot   10m0s
	// qq       24h0m0s
	// line     24h0m0s
	// meta     192h0m0s
	// matrix   24h0m0s
	// wechat   10m0s
	// wecom    10m0s
	// dingtalk 24h0m0s
	// dingtalk-events 24h0m0s
	// webhooks 96h0m0s
	// github   96h0m0s
	// stripe   96h0m0s
}

// A OneBot implementation connected over WebSocket sends events as frames,
// without HTTP headers: Extract takes the frame with a nil header. Each bot
// (self_id) numbers its messages apart, so the bot is part of the key.
func ExamplePreset_Extract_websocket() {
	frame := []byte(`{"post_type":"message","message_type":"group","self_id":3170000123,"message_id":-2117483012,"raw_message":"hi"}`)
	k, err := platform.OneBot.Extract(frame, nil)
	fmt.Println(k, err)

	_, err = platform.OneBot.Extract([]byte(`{"post_type":"meta_event","meta_event_type":"heartbeat","self_id":3170000123}`), nil)
	fmt.Println(errors.Is(err, platform.ErrNotAMessage))
	// Output:
	// onebot:3170000123:-2117483012 <nil>
	// true
}
