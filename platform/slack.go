package platform

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Slack is the preset for the Slack Events API. The key is the envelope's
// event_id, "a unique identifier for this specific event, globally unique
// across all workspaces", which a retry repeats. Retries carry the headers
// X-Slack-Retry-Num (1, 2, 3) and X-Slack-Retry-Reason (such as
// "http_timeout"); the key does not depend on them, so a retry is found to be
// a copy of its first delivery.
//
// TTL 1 h: Slack retries a delivery that got no 2xx within 3 seconds three
// times, "nearly immediately", "after 1 minute" and "after 5 minutes" (Events
// API, "Retries"), so the last copy comes about 6 minutes after the first. A
// TTL never under 10 minutes is needed; an hour leaves room for delays on
// either side at little cost.
//
// AckBudget 2 s: Slack waits 3 seconds for a 2xx (Events API, "Responding to
// events"); the last second is left for the network and the answer.
//
// Secret: the app's Signing Secret. Slack sends X-Slack-Signature, "v0=" and
// the hex HMAC-SHA256 of "v0:{X-Slack-Request-Timestamp}:{body}" keyed with
// it, and [Preset.Verify] refuses a delivery whose signature differs or whose
// timestamp is more than 5 minutes from now, as Slack asks, against replays
// (Slack API, "Verifying requests from Slack",
// https://api.slack.com/authentication/verifying-requests-from-slack). URL
// verification requests are signed too.
//
// A url_verification challenge or an app_rate_limited notice returns
// [ErrNotAMessage].
//
// Interactivity and slash commands: Slack posts an interaction (a button
// clicked, a modal submitted, a shortcut) as a form whose payload field
// holds its JSON, and a slash command as a form of its own fields, at the
// Request URLs of "Interactivity & Shortcuts" and of each command, which
// Bolt apps point at the same endpoint as events. The preset reads these
// too: the key is their trigger_id, "a temporary ID generated for the
// interaction" (Slack API, interaction payloads and slash commands). An
// options request (block_suggestion) and a command's ssl_check return
// [ErrNotAMessage]; a view_closed payload has no trigger_id and returns
// [dedupe.ErrNoMessageID]. Slack shows the answer to these: a command's
// reply, a view_submission's response_action, an action's message update;
// it must come within 3 seconds, or the user sees an error. So Replay is
// set: a copy is answered with the first answer. Events API answers are
// ignored by Slack, and an empty one is not kept.
var Slack = Preset{
	Name:        "slack",
	TTL:         time.Hour,
	AckBudget:   2 * time.Second,
	Replay:      true,
	MessageID:   slackMessageID,
	newVerifier: newSlackVerifier,
}

var slackFields = [...]string{"type", "event_id"}

func slackMessageID(body []byte, _ http.Header) (string, error) {
	if id, form, err := slackFormID(body); form {
		return id, err
	}
	var v [len(slackFields)][]byte
	if err := decodeBody("slack", body, slackFields[:], v[:]); err != nil {
		return "", err
	}
	typ, err := stringField("slack", "type", v[0])
	if err != nil {
		return "", err
	}
	switch typ {
	case "url_verification", "app_rate_limited":
		return "", fmt.Errorf("%w: slack %s", ErrNotAMessage, typ)
	}
	return parseID(v[1]).require("slack event", "event_id")
}

// slackWindow is how far from now Slack's request timestamp may be: "If the
// difference between the request timestamp and the current time is greater
// than 5 minutes, ignore the request" (Verifying requests from Slack).
const slackWindow = 5 * time.Minute

type slackVerifier struct{ key []byte }

func newSlackVerifier(secret string) (verifier, error) { return slackVerifier{[]byte(secret)}, nil }

func (v slackVerifier) verify(_ *Preset, body []byte, h http.Header, now time.Time) ([]byte, error) {
	ts := h.Get("X-Slack-Request-Timestamp")
	if err := checkTimestamp("slack", "X-Slack-Request-Timestamp", ts, now, slackWindow); err != nil {
		return nil, err
	}
	sig, ok := strings.CutPrefix(h.Get("X-Slack-Signature"), "v0=")
	if !ok {
		return nil, unauthenticated("slack", "request has no v0 X-Slack-Signature")
	}
	mac := hmac.New(sha256.New, v.key)
	mac.Write([]byte("v0:"))
	mac.Write([]byte(ts))
	mac.Write([]byte(":"))
	mac.Write(body)
	if !equalHex(sig, mac.Sum(nil)) {
		return nil, unauthenticated("slack", "X-Slack-Signature does not match the body")
	}
	return body, nil
}
