package platform

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Feishu is the preset for Feishu/Lark event subscriptions (request URL mode,
// schema 2.0). For im.message.receive_v1 the key is the message's id,
// event.message.message_id ("om_…"), not header.event_id: Feishu may push the
// same message more than once under different event ids, and the message id is
// what stays (in the 1.0 schema, a "message" event's event.open_message_id,
// not its uuid). Other event types carry no message of their own (a reaction or a
// recall names the message it is about, and must not be taken for a copy of
// it), so for them the key is header.event_id (uuid in the 1.0 schema), a best
// effort that catches retries of one push.
//
// TTL 12 h: when the request URL does not answer with HTTP 200 within 3
// seconds, Feishu pushes the event again after 15 s, 5 min, 1 h and 6 h (Feishu
// Open Platform, event subscription, "retry"), about 7 h 5 min in all. Twelve
// hours cover that with margin and are half the memory of the 24 h default.
//
// AckBudget 2 s: Feishu waits 3 seconds for the HTTP 200; the last second is
// left for the network and the answer.
//
// Secret: the app's Encrypt Key when one is set (events then come encrypted
// and signed, and the key both decrypts and authenticates them), otherwise
// its Verification Token. With an Encrypt Key, give the Verification Token
// too with [Preset.WithVerificationToken]: Feishu sends its request URL check
// encrypted but unsigned, and the token inside is what authenticates it. See
// [Preset.Verify] for what each mode checks; the one-secret form keeps
// working for events, since an encrypted body is checked with the Encrypt
// Key and a plain one with the token:
//
//	feishu := platform.Feishu.WithSecret(encryptKey).WithVerificationToken(verificationToken)
//
// A url_verification challenge returns [ErrNotAMessage]. [Preset.Answer]
// answers it ({"challenge": "…"}) once Verify accepted it, so the
// middleware of package dedupehttp answers it itself; an encrypted one that
// came unsigned never reaches a handler. A body encrypted with the app's
// Encrypt Key ({"encrypt": "…"}) is decrypted by [Preset.Verify]; given to
// Extract as it is, it returns an error wrapping [dedupe.ErrNoMessageID].
//
// Card callbacks (card.action.trigger, sent when a user clicks a button of
// an interactive card or submits its form) are schema 2.0 deliveries keyed
// by header.event_id like other events. Feishu shows their answer: a body
// of {"toast": …, "card": …} shows the toast and updates the card, and it
// must come within 3 seconds (Feishu Open Platform, "卡片回传交互", card
// callback communication). So Replay is set: a copy is answered with the
// first answer, but only a copy signed with the Encrypt Key
// (X-Lark-Signature): a plain delivery carries the Verification Token in
// its body and nothing else proves it ([Preset.TokenInBody]), so it gets the
// plain duplicate answer, never a kept one. An app without an Encrypt Key
// (a preset given only its Verification Token, with WithSecret or
// [Preset.WithVerificationToken]) thus replays no answer. Event answers are ignored by Feishu, and an empty one is not
// kept. The legacy card callback of a "message card request URL" (no
// schema, no id) is not keyed.
var Feishu = Preset{
	Name:        "feishu",
	TTL:         12 * time.Hour,
	AckBudget:   2 * time.Second,
	Replay:      true,
	MessageID:   feishuMessageID,
	newVerifier: newFeishuVerifier,
	takesToken:  true,
}

var (
	feishuFields        = [...]string{"schema", "type", "uuid", "encrypt", "header", "event"}
	feishuHeaderFields  = [...]string{"event_id", "event_type"}
	feishuEventFields   = [...]string{"type", "open_message_id", "message"}
	feishuMessageFields = [...]string{"message_id"}
)

// feishuEvent is what the Feishu preset reads of a delivery.
type feishuEvent struct {
	schema, typ, eventType, eventTypeV1 string
	encrypted                           bool
	uuid, eventID, openMessageID, msgID []byte
}

func feishuMessageID(body []byte, _ http.Header) (string, error) {
	e, err := decodeFeishu(body)
	if err != nil {
		return "", err
	}
	switch {
	case e.typ == "url_verification":
		return "", fmt.Errorf("%w: feishu url_verification", ErrNotAMessage)
	case e.encrypted:
		return "", fmt.Errorf("%w: feishu body is encrypted: decrypt it with the app's Encrypt Key first (Preset.WithSecret)", dedupe.ErrNoMessageID)
	case e.eventType == "im.message.receive_v1":
		return parseID(e.msgID).require("feishu im.message.receive_v1", "event.message.message_id")
	case e.schema == "" && e.eventTypeV1 == "message":
		return parseID(e.openMessageID).require("feishu 1.0 message event", "event.open_message_id")
	case e.schema == "":
		return parseID(e.uuid).require("feishu 1.0 event", "uuid")
	}
	return parseID(e.eventID).require("feishu event", "header.event_id")
}

func decodeFeishu(body []byte) (feishuEvent, error) {
	var (
		e   feishuEvent
		v   [len(feishuFields)][]byte
		hdr [len(feishuHeaderFields)][]byte
		ev  [len(feishuEventFields)][]byte
		msg [len(feishuMessageFields)][]byte
		err error
	)
	if err = decodeBody("feishu", body, feishuFields[:], v[:]); err != nil {
		return e, err
	}
	if err = object("feishu", "header", v[4], feishuHeaderFields[:], hdr[:]); err != nil {
		return e, err
	}
	if err = object("feishu", "event", v[5], feishuEventFields[:], ev[:]); err != nil {
		return e, err
	}
	if err = object("feishu", "event.message", ev[2], feishuMessageFields[:], msg[:]); err != nil {
		return e, err
	}
	e.uuid, e.eventID, e.openMessageID, e.msgID = v[2], hdr[0], ev[1], msg[0]
	encrypt := ""
	for _, f := range []struct {
		dst   *string
		field string
		raw   []byte
	}{
		{&e.schema, "schema", v[0]}, {&e.typ, "type", v[1]}, {&encrypt, "encrypt", v[3]},
		{&e.eventType, "header.event_type", hdr[1]}, {&e.eventTypeV1, "event.type", ev[0]},
	} {
		if *f.dst, err = stringField("feishu", f.field, f.raw); err != nil {
			return e, err
		}
	}
	e.encrypted = encrypt != ""
	return e, nil
}
