package platform

import (
	"crypto/hmac"
	"crypto/sha1"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// OneBot is the preset for OneBot v11 events, posted by reverse HTTP or sent over
// (reverse) WebSocket by go-cqhttp, NapCat, Lagrange and the like. The key's
// MessageID is "{self_id}:{message_id}": OneBot message ids are 32-bit numbers
// counted per bot, so two bots in one group report different ids for one
// message, and one id may mean different messages to different bots. Keeping
// the channel "onebot" (a channel cannot contain ':') and the bot in the id lets
// one store serve many bots. self_id must be an integer, or a string of
// digits, so that the first ':' of the key always ends it: no two (self_id,
// message_id) pairs give one key. When the body has no self_id, the
// X-Self-ID header of an HTTP POST names the bot ("the bot QQ number being
// reported, the same as self_id in the body", OneBot 11, communication/
// http-post.md); that header is not covered by the signature.
//
// Only message events (post_type "message" and "message_sent") have a key: a
// notice such as group_recall carries the message_id of the message it is
// about, so keying it would drop it as a copy of that message. Notices and
// requests return [dedupe.ErrNoMessageID]; meta events (heartbeat, lifecycle)
// return [ErrNotAMessage].
//
// Over WebSocket there are no HTTP headers: pass each event frame to
// [Preset.Extract] with a nil header. OneBot authenticates a WebSocket
// connection once, with its access token, when it is made, not frame by frame,
// so frames are not passed to [Preset.Verify], which would refuse them.
//
// TTL 10 min: OneBot v11 defines no redelivery; copies come from a bot
// connected twice (HTTP and WebSocket) or replays on reconnect, seconds apart.
// Implementations such as go-cqhttp derive message_id from a 32-bit hash, so
// the longer the TTL, the likelier a new message is taken for an older one with
// the same id: for a bot seeing 10,000 messages an hour, about once in 11 days
// with 10 minutes, about 13 times a day with 24 h.
//
// AckBudget 3 s: go-cqhttp gives up on an HTTP POST after its configured
// timeout, at least 5 seconds (Mrs4s/go-cqhttp, server/http.go: "if c.timeout
// < 5 { c.timeout = 5 }"), and retries; a copy waits three fifths of that.
//
// Secret: the secret of the HTTP POST configuration. OneBot then sends
// X-Signature, "sha1=" and the hex HMAC-SHA1 of the body keyed with it (OneBot
// 11, communication/http-post.md, 签名), which [Preset.Verify] checks. The
// body carries no timestamp the signature covers other than the event's own
// "time", so a captured delivery can be replayed once its key has expired.
var OneBot = Preset{
	Name:        "onebot",
	TTL:         10 * time.Minute,
	AckBudget:   3 * time.Second,
	MessageID:   oneBotMessageID,
	newVerifier: newOneBotVerifier,
}

var oneBotFields = [...]string{"post_type", "self_id", "message_id"}

func oneBotMessageID(body []byte, h http.Header) (string, error) {
	var v [len(oneBotFields)][]byte
	if err := decodeBody("onebot", body, oneBotFields[:], v[:]); err != nil {
		return "", err
	}
	postType, err := stringField("onebot", "post_type", v[0])
	if err != nil {
		return "", err
	}
	switch postType {
	case "message", "message_sent":
	case "meta_event":
		return "", fmt.Errorf("%w: onebot meta_event", ErrNotAMessage)
	default:
		return "", fmt.Errorf("%w: onebot %q event is not a message", dedupe.ErrNoMessageID, postType)
	}
	self, err := oneBotSelfID(v[1], h)
	if err != nil {
		return "", err
	}
	id, err := parseID(v[2]).require("onebot message", "message_id")
	if err != nil {
		return "", err
	}
	return self + ":" + id, nil
}

// oneBotSelfID returns the bot's id: the body's self_id, or the X-Self-ID
// header when the body has none. Either must be an integer (a JSON number or
// a string of digits).
func oneBotSelfID(raw []byte, h http.Header) (string, error) {
	self := parseID(raw)
	field := "self_id"
	if self.kind == kindAbsent {
		if hv := h.Get("X-Self-ID"); hv != "" {
			self, field = jsonID{text: hv, kind: kindString}, "X-Self-ID"
		}
	}
	id, err := self.require("onebot event", field)
	if err != nil {
		return "", err
	}
	if !jsonscan.IsInteger(id) {
		return "", fmt.Errorf("%w: onebot %s %q is not an integer", dedupe.ErrInvalidKey, field, id)
	}
	return id, nil
}

type oneBotVerifier struct{ key []byte }

func newOneBotVerifier(secret string) (verifier, error) { return oneBotVerifier{[]byte(secret)}, nil }

func (v oneBotVerifier) verify(_ *Preset, body []byte, h http.Header, _ time.Time) ([]byte, error) {
	sig, ok := strings.CutPrefix(h.Get("X-Signature"), "sha1=")
	if !ok {
		return nil, unauthenticated("onebot", "request has no sha1 X-Signature")
	}
	mac := hmac.New(sha1.New, v.key)
	mac.Write(body)
	if !equalHex(sig, mac.Sum(nil)) {
		return nil, unauthenticated("onebot", "X-Signature does not match the body")
	}
	return body, nil
}
