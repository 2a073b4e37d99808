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
// http-post.md); that header is not covered by the signature, so with one
// secret shared by several bots a body without self_id, replayed under
// another bot's X-Self-ID, would take that bot's message ids. Give each bot
// its own secret with [Preset.WithBotSecrets] when several share an
// endpoint: the header is then checked against the secret that signed the
// body.
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
// 11, communication/http-post.md, 签名,
// https://github.com/botuniverse/onebot-11/blob/master/communication/http-post.md),
// which [Preset.Verify] checks. Several bots, each with its own secret:
//
//	bots := platform.OneBot.WithBotSecrets(map[string]string{
//		"3170000123": os.Getenv("BOT1_SECRET"),
//		"3170000456": os.Getenv("BOT2_SECRET"),
//	})
//
// The body carries no timestamp the signature covers other than the event's
// own "time", so a captured delivery can be replayed once its key has
// expired.
var OneBot = Preset{
	Name:           "onebot",
	TTL:            10 * time.Minute,
	AckBudget:      3 * time.Second,
	MessageID:      oneBotMessageID,
	newVerifier:    newOneBotVerifier,
	newBotVerifier: newOneBotBots,
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
	if err := checkOneBotSignature(v.key, body, h); err != nil {
		return nil, err
	}
	return body, nil
}

// checkOneBotSignature checks X-Signature, "sha1=" and the hex HMAC-SHA1 of
// body keyed with key.
func checkOneBotSignature(key, body []byte, h http.Header) error {
	sig, ok := strings.CutPrefix(h.Get("X-Signature"), "sha1=")
	if !ok {
		return unauthenticated("onebot", "request has no sha1 X-Signature")
	}
	mac := hmac.New(sha1.New, key)
	mac.Write(body)
	if !equalHex(sig, mac.Sum(nil)) {
		return unauthenticated("onebot", "X-Signature does not match the body")
	}
	return nil
}

// oneBotBots is the verifier of [Preset.WithBotSecrets]: a secret per bot.
type oneBotBots struct{ keys map[string][]byte }

func newOneBotBots(secrets map[string]string) (verifier, error) {
	keys := make(map[string][]byte, len(secrets))
	for id, secret := range secrets {
		if !jsonscan.IsInteger(id) || id[0] == '-' {
			return nil, unauthenticated("onebot", fmt.Sprintf("bot id %q is not a self_id (digits)", id))
		}
		if secret == "" {
			return nil, unauthenticated("onebot", "secret of bot "+id+" is empty")
		}
		keys[id] = []byte(secret)
	}
	return oneBotBots{keys}, nil
}

var oneBotSelfField = [...]string{"self_id"}

// verify checks the signature with the secret of the bot the delivery
// names: its self_id and its X-Self-ID, which must agree when both are
// there. A body replayed under another bot's X-Self-ID was signed with
// another secret, and is refused.
func (v oneBotBots) verify(_ *Preset, body []byte, h http.Header, _ time.Time) ([]byte, error) {
	var raw [len(oneBotSelfField)][]byte
	if decodeBody("onebot", body, oneBotSelfField[:], raw[:]) != nil {
		return nil, unauthenticated("onebot", "body is not a JSON object")
	}
	id, err := oneBotSelfID(raw[0], h)
	if err != nil {
		return nil, unauthenticated("onebot", "delivery names no bot: "+err.Error())
	}
	if hv := h.Get("X-Self-ID"); hv != "" && hv != id {
		return nil, unauthenticated("onebot", "X-Self-ID differs from the body's self_id")
	}
	key, ok := v.keys[id]
	if !ok {
		return nil, unauthenticated("onebot", "bot "+id+" has no secret")
	}
	if err := checkOneBotSignature(key, body, h); err != nil {
		return nil, err
	}
	return body, nil
}
