package platform

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe"
)

// LINE is the preset for LINE Messaging API webhooks. LINE posts a batch,
// {"destination": …, "events": [ … ]}, so the preset keys each event with
// [Preset.Events]: the key is the event's webhookEventId, "an ID that
// uniquely identifies a webhook event", a ULID such as
// "01FZ74A0TDDPYRVKNK77XKC3ZR" (Messaging API reference, Common properties,
// https://developers.line.biz/en/reference/messaging-api/#common-properties).
// A redelivered event keeps its webhookEventId and says so in
// deliveryContext.isRedelivery ("Whether the webhook event is a redelivered
// one or not"); a redelivery may group events differently, so they are keyed
// one by one, never by batch. The key does not read isRedelivery: a first
// delivery and its redelivery are one key.
//
// An event without webhookEventId (every event LINE sends today has one;
// bodies written before it was added, such as the SDKs' older tests, lack
// it) makes the whole delivery [dedupe.ErrNoMessageID], rather than being
// left out of Events where it would be lost: served without deduplication
// or refused, as the caller's policy says. MessageID returns the id of a body with one
// event, [ErrNotAMessage] for one without events, and
// [dedupe.ErrNoMessageID] for one with several: key those with Events.
//
// URL verification: "The LINE Platform may send an HTTP POST request that
// doesn't include a webhook event to confirm communication. In this case,
// send a 200 status code" (Receive messages (webhook),
// https://developers.line.biz/en/docs/messaging-api/receiving-messages/;
// Verify the webhook URL shows that body, {"destination": "xxxxxxxxxx",
// "events": []}, https://developers.line.biz/en/docs/messaging-api/verify-webhook-url/).
// Such a body, signed like any other, has an empty events[]: Events returns
// no event and MessageID [ErrNotAMessage], so it reaches the handler, which
// answers 200.
//
// TTL 24 h, the library's [dedupe.DefaultTTL]: LINE redelivers events that
// failed when "webhook redelivery" is on, but publishes no schedule to size
// a TTL from (its error notification sends a mail "When the LINE Platform
// stopped webhook redelivery"), and suspends webhooks to "bot servers that
// have been failing to receive webhooks for a long period of time".
//
// AckBudget 1 s: LINE records request_timeout when "the bot server didn't
// return a response within 2 seconds" (Check webhook error causes and
// statistics,
// https://developers.line.biz/en/docs/messaging-api/check-webhook-error-statistics/);
// the last second is left for the network and the answer.
//
// Secret: the channel secret. LINE sends X-Line-Signature, the base64 of the
// HMAC-SHA256 of the body keyed with it (Verify webhook signature,
// https://developers.line.biz/en/docs/messaging-api/verify-webhook-signature/;
// line/line-bot-sdk-go, linebot/webhook/parse.go, ValidateSignature, does
// the same), which [Preset.Verify] checks in constant time. LINE signs no
// timestamp: a captured delivery can be replayed, and is caught as a copy
// only while its keys are remembered (the TTL).
var LINE = Preset{
	Name:        "line",
	TTL:         dedupe.DefaultTTL,
	AckBudget:   time.Second,
	MessageID:   lineMessageID,
	Events:      lineEvents,
	newVerifier: newLINEVerifier,
}

var (
	lineFields      = [...]string{"events"}
	lineEventFields = [...]string{"webhookEventId"}
)

func lineMessageID(body []byte, h http.Header) (string, error) {
	evs, err := lineEvents(body, h)
	return onlyEvent("line", "url verification (no events)", evs, err)
}

func lineEvents(body []byte, _ http.Header) ([]Event, error) {
	var v [len(lineFields)][]byte
	if err := decodeBody("line", body, lineFields[:], v[:]); err != nil {
		return nil, err
	}
	if v[0] == nil {
		return nil, fmt.Errorf("%w: line body has no events", dedupe.ErrNoMessageID)
	}
	evs := []Event{}
	err := elements("line", "events", v[0], func(e []byte) error {
		var f [len(lineEventFields)][]byte
		err := element("line", "events[]", e, lineEventFields[:], f[:])
		var id string
		if err == nil {
			id, err = parseID(f[0]).require("line event", "webhookEventId")
		}
		evs = append(evs, keyEvent(e, id, err))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// lineHeader carries the signature.
const lineHeader = "X-Line-Signature"

type lineVerifier struct{ key []byte }

func newLINEVerifier(secret string) (verifier, error) { return lineVerifier{[]byte(secret)}, nil }

func (v lineVerifier) verify(_ *Preset, body []byte, h http.Header, _ time.Time) ([]byte, error) {
	got := h.Get(lineHeader)
	if got == "" {
		return nil, unauthenticated("line", "request has no "+lineHeader)
	}
	sig, err := base64.StdEncoding.DecodeString(got)
	if err != nil || len(sig) != sha256.Size {
		return nil, unauthenticated("line", lineHeader+" is not the base64 of 32 bytes")
	}
	mac := hmac.New(sha256.New, v.key)
	mac.Write(body)
	if subtle.ConstantTimeCompare(sig, mac.Sum(nil)) != 1 {
		return nil, unauthenticated("line", lineHeader+" does not match the body")
	}
	return body, nil
}
