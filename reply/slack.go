package reply

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// slackBase is the address of Slack's Web API.
const slackBase = "https://slack.com"

// SlackEventType is the event_type of the message metadata that
// [SlackPostMessage] attaches to a reply and [SlackCheck] searches for; its
// event_payload is {"token": the reply's token}.
const SlackEventType = "dedupe_reply"

// slackCheckDefault is how many recent messages [SlackCheck] reads when its
// limit is 0 or less: conversations.history's default page.
const slackCheckDefault = 100

// SlackPostMessage returns a [SendFunc] that posts the body (chat.postMessage's
// JSON arguments, {"channel": …, "text": …} and the like) with POST
// /api/chat.postMessage, with message metadata carrying the reply's token:
// {"event_type": "dedupe_reply", "event_payload": {"token": …}} (the
// [Sender]'s token if its platform has one, else a [UUID] of the key and
// slot: the [Slack] preset has none). The member metadata of the body is
// replaced.
//
// chat.postMessage takes no idempotency token
// (https://docs.slack.dev/reference/methods/chat.postMessage), but a message
// can carry metadata (https://docs.slack.dev/messaging/message-metadata) that
// conversations.history returns, so [SlackCheck] can tell after the fact
// whether a send whose outcome is unknown was posted. The outcome is:
//
//   - 200 with "ok": true: sent; the id is the message's ts.
//   - 200 with "ok": false and an error (channel_not_found, not_in_channel,
//     msg_too_long, ratelimited, …), or a 4xx (429): [NotSent]; but the
//     errors internal_error, fatal_error, service_unavailable and
//     request_timeout, which Slack answers when its side failed, and a 5xx,
//     a timeout, a cut connection: unknown.
func SlackPostMessage(api API) SendFunc {
	return func(ctx context.Context, m Message) (string, error) {
		body, err := withMembers("slack", m.Body, map[string]any{"metadata": map[string]any{
			"event_type":    SlackEventType,
			"event_payload": map[string]string{"token": tokenOr(m, UUID)},
		}})
		if err != nil {
			return "", err
		}
		a, err := api.call(ctx, "slack", http.MethodPost, slackBase, "/api/chat.postMessage", bearer(api.Credential), body)
		if err != nil {
			return "", err
		}
		if a.status/100 != 2 {
			return "", statusError("slack", a)
		}
		var r struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
			TS    string `json:"ts"`
		}
		if err := json.Unmarshal(a.body, &r); err != nil {
			return "", fmt.Errorf("reply: slack: reading the answer: %w", err)
		}
		if !r.OK {
			return "", slackError(r.Error)
		}
		return r.TS, nil
	}
}

// slackError is the outcome of a Slack answer with "ok": false: unknown for
// the errors that say Slack's side failed, [NotSent] for the rest.
func slackError(code string) error {
	err := fmt.Errorf("reply: slack answered error %q", code)
	switch code {
	case "internal_error", "fatal_error", "service_unavailable", "request_timeout":
		return err
	}
	return NotSent(err)
}

// SlackCheck returns a read-back check for [WithCheck]: before a reply whose
// send's outcome is unknown is sent again, it reads the last limit messages
// of the reply's channel (the body's "channel"; of its thread with
// conversations.replies when the body has a "thread_ts") with
// include_all_metadata, and finds the one whose metadata [SlackPostMessage]
// attached: found, the reply is recorded as sent with that message's ts; not
// found, it is sent again. limit 0 or less means 100, conversations.history's
// default; Slack caps it at 999, and at 15 for apps distributed outside its
// Marketplace, which it also limits to one call a minute
// (https://docs.slack.dev/reference/methods/conversations.history).
//
// The check is as good as its window: a reply that more than limit messages
// have followed into the channel by the time of the check is not found and is
// sent again. The bot needs the history scope of the conversation
// (channels:history, groups:history, im:history or mpim:history). An error of
// the check (a 4xx, a 5xx, "ok": false) is returned, and the reply is not
// sent.
func SlackCheck(api API, limit int) func(ctx context.Context, m Message) (string, bool, error) {
	if limit <= 0 {
		limit = slackCheckDefault
	}
	return func(ctx context.Context, m Message) (string, bool, error) {
		var target struct {
			Channel  string `json:"channel"`
			ThreadTS string `json:"thread_ts"`
		}
		if err := json.Unmarshal(m.Body, &target); err != nil || target.Channel == "" {
			return "", false, fmt.Errorf("reply: slack: the body names no channel: %v", err)
		}
		q := url.Values{"channel": {target.Channel}, "limit": {strconv.Itoa(limit)}, "include_all_metadata": {"true"}}
		method := "/api/conversations.history?"
		if target.ThreadTS != "" {
			method = "/api/conversations.replies?"
			q.Set("ts", target.ThreadTS)
		}
		a, err := api.call(ctx, "slack", http.MethodGet, slackBase, method+q.Encode(), bearer(api.Credential), nil)
		if err != nil {
			return "", false, err
		}
		if a.status/100 != 2 {
			return "", false, statusError("slack", a)
		}
		return slackFind(a.body, tokenOr(m, UUID))
	}
}

// slackFind looks for the message whose metadata carries token in a
// conversations.history (or .replies) answer.
func slackFind(body []byte, token string) (string, bool, error) {
	var r struct {
		OK       bool   `json:"ok"`
		Error    string `json:"error"`
		Messages []struct {
			TS       string `json:"ts"`
			Metadata struct {
				EventType    string          `json:"event_type"`
				EventPayload json.RawMessage `json:"event_payload"`
			} `json:"metadata"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "", false, fmt.Errorf("reply: slack: reading the history: %w", err)
	}
	if !r.OK {
		return "", false, fmt.Errorf("reply: slack answered error %q", r.Error)
	}
	for _, msg := range r.Messages {
		if msg.Metadata.EventType != SlackEventType {
			continue // another app's metadata, whatever its payload
		}
		var p struct {
			Token string `json:"token"`
		}
		if json.Unmarshal(msg.Metadata.EventPayload, &p) == nil && p.Token == token {
			return msg.TS, true, nil
		}
	}
	return "", false, nil
}
