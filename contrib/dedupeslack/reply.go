package dedupeslack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/gatewaykit/dedupe/reply"
	"github.com/slack-go/slack"
)

// ReplyBody is the body of a reply that [PostMessage] posts and [Check]
// looks for: compose returns its json.Marshal. Its members are
// chat.postMessage's own, so package reply's plain-HTTP
// [reply.SlackPostMessage] and [reply.SlackCheck] read it too.
type ReplyBody struct {
	Channel  string `json:"channel"`             // the conversation's id
	Text     string `json:"text"`                // the message, in mrkdwn
	ThreadTS string `json:"thread_ts,omitempty"` // the thread's parent ts, for a reply in a thread
}

// PostMessage returns a [reply.SendFunc] that posts a reply ([ReplyBody])
// with chat.postMessage through api, with opts after the body's text and
// thread (blocks, attachments, …), and with message metadata carrying the
// reply's token: event_type [reply.SlackEventType], event_payload
// {"token": …} (the [reply.Sender]'s token, or a [reply.UUID] of the key and
// slot: the [reply.Slack] preset has none). For a Sender of [reply.Slack]:
//
//	sender := reply.New(store, reply.Slack, reply.WithCheck(dedupeslack.Check(api, 0)))
//	compose := func(ctx context.Context) ([]byte, error) {
//		return json.Marshal(dedupeslack.ReplyBody{Channel: ev.Channel, Text: answer})
//	}
//	rc, err := sender.Send(ctx, key, 0, compose, dedupeslack.PostMessage(api))
//
// chat.postMessage takes no idempotency token
// (https://docs.slack.dev/reference/methods/chat.postMessage); metadata
// (https://docs.slack.dev/messaging/message-metadata) lets [Check] find the
// message afterwards. The outcome of a send is: a ts back, sent; a
// [slack.SlackErrorResponse] (channel_not_found, not_in_channel, …), a
// [slack.RateLimitedError], a 4xx or a failure to connect, [reply.NotSent];
// the errors internal_error, fatal_error, service_unavailable and
// request_timeout, a 5xx, a timeout, a cut connection, unknown.
func PostMessage(api *slack.Client, opts ...slack.MsgOption) reply.SendFunc {
	return func(ctx context.Context, m reply.Message) (string, error) {
		var b ReplyBody
		if err := json.Unmarshal(m.Body, &b); err != nil || b.Channel == "" {
			return "", reply.NotSent(fmt.Errorf("dedupeslack: the reply's body is not a ReplyBody with a channel: %v", err))
		}
		all := []slack.MsgOption{slack.MsgOptionText(b.Text, false)}
		if b.ThreadTS != "" {
			all = append(all, slack.MsgOptionTS(b.ThreadTS))
		}
		all = append(all, opts...)
		all = append(all, slack.MsgOptionMetadata(slack.SlackMetadata{
			EventType:    reply.SlackEventType,
			EventPayload: map[string]any{"token": token(m)},
		}))
		_, ts, err := api.PostMessageContext(ctx, b.Channel, all...)
		if err != nil {
			return "", outcome(fmt.Errorf("dedupeslack: chat.postMessage: %w", err))
		}
		return ts, nil
	}
}

// Check returns a read-back for [reply.WithCheck]: before a reply whose
// send's outcome is unknown is sent again, it reads the last limit messages
// of the reply's channel (of its thread when the [ReplyBody] has a
// ThreadTS) with include_all_metadata, and looks for the metadata
// [PostMessage] attached. Found, the reply is recorded as sent with that
// message's ts; not found, it is sent again. limit 0 or less means 100.
// conversations.history
// (https://docs.slack.dev/reference/methods/conversations.history) caps it
// at 999, and at 15 for apps distributed outside the Slack Marketplace, which
// it limits to a call a minute; a reply that more than limit messages have
// followed is not found and is sent again. The bot needs the conversation's
// history scope (channels:history, groups:history, im:history, mpim:history).
// An error of the check is returned by Send, and nothing is sent.
func Check(api *slack.Client, limit int) func(ctx context.Context, m reply.Message) (string, bool, error) {
	if limit <= 0 {
		limit = 100
	}
	return func(ctx context.Context, m reply.Message) (string, bool, error) {
		var b ReplyBody
		if err := json.Unmarshal(m.Body, &b); err != nil || b.Channel == "" {
			return "", false, fmt.Errorf("dedupeslack: the reply's body is not a ReplyBody with a channel: %v", err)
		}
		msgs, err := history(ctx, api, b, limit)
		if err != nil {
			return "", false, fmt.Errorf("dedupeslack: check: %w", err)
		}
		tok := token(m)
		for _, msg := range msgs {
			if msg.Metadata.EventType == reply.SlackEventType && msg.Metadata.EventPayload["token"] == tok {
				return msg.Timestamp, true, nil
			}
		}
		return "", false, nil
	}
}

// history reads the last limit messages of the body's channel or thread.
func history(ctx context.Context, api *slack.Client, b ReplyBody, limit int) ([]slack.Message, error) {
	if b.ThreadTS != "" {
		msgs, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
			ChannelID: b.Channel, Timestamp: b.ThreadTS, Limit: limit, IncludeAllMetadata: true,
		})
		return msgs, err
	}
	resp, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
		ChannelID: b.Channel, Limit: limit, IncludeAllMetadata: true,
	})
	if err != nil {
		return nil, err
	}
	return resp.Messages, nil
}

// token is the reply's token, or a UUID of its key and slot.
func token(m reply.Message) string {
	if m.Token != "" {
		return m.Token
	}
	return reply.UUID(m.Key, m.Slot)
}

// outcome classifies an error of chat.postMessage.
func outcome(err error) error {
	var se slack.SlackErrorResponse
	var rl *slack.RateLimitedError
	var sc slack.StatusCodeError
	var op *net.OpError
	switch {
	case errors.As(err, &se):
		switch se.Err {
		case "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return err
		}
		return reply.NotSent(err)
	case errors.As(err, &rl):
		return reply.NotSent(err)
	case errors.As(err, &sc):
		if sc.Code/100 == 4 {
			return reply.NotSent(err)
		}
		return err
	case errors.As(err, &op) && op.Op == "dial":
		return reply.NotSent(err)
	}
	return err
}
