package platform

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// QQ is the preset for the QQ official bot platform's webhook (HTTP callback).
// The key is the event id, the payload's top-level id, on an op 0 dispatch
// such as GROUP_AT_MESSAGE_CREATE or C2C_MESSAGE_CREATE. Each event has its own
// id, so a MESSAGE_DELETE is not taken for a copy of the message it deletes.
//
// TTL 24 h, the library's [dedupe.DefaultTTL]: the QQ bot documentation asks for an
// answer (op 12) to each callback but gives no redelivery schedule to size a
// shorter TTL from, and the NekoBot gateway keeps QQ keys for 24 h.
//
// AckBudget 2 s: the bot "needs to answer 200 or 204 within 3 seconds"
// (tencent-connect/bot-docs, event-emit.md, Webhook方式, before commit
// 469ff2d: "机器人服务端需要在 3 秒内响应200或204"); the last second is left for
// the network and the answer.
//
// Secret: the bot's AppSecret. The Ed25519 key is derived from it, its seed
// being the secret repeated to 32 bytes, and QQ signs each callback over
// "{X-Signature-Timestamp}{body}" with the signature in X-Signature-Ed25519
// (tencent-connect/bot-docs, interface-framework/sign.md, 验证签名).
// [Preset.Verify] also refuses a timestamp further than the TTL from now, and
// a signed body that is not a JSON object.
//
// The callback URL validation (op 13) comes unsigned (event-emit.md, 回调地址
// 及事件监听配置: its headers are User-Agent and X-Bot-Appid): Verify lets an
// unsigned op 13 through, and [Preset.Answer] answers it with
// {"plain_token": …, "signature": hex(Ed25519 signature of event_ts +
// plain_token)}. Because anyone can send an op 13, Answer signs only an
// event_ts of digits and a plain_token without the characters that open a
// JSON object, array or string, and Verify accepts only signed bodies that are
// JSON objects: the answer can never serve as the signature of a forged
// callback. The validation and any op other than 0 return [ErrNotAMessage].
var QQ = Preset{
	Name:        "qq",
	TTL:         dedupe.DefaultTTL,
	AckBudget:   2 * time.Second,
	MessageID:   qqMessageID,
	newVerifier: newQQVerifier,
}

var qqFields = [...]string{"op", "id", "d"}

func qqMessageID(body []byte, _ http.Header) (string, error) {
	var v [len(qqFields)][]byte
	if err := decodeBody("qq", body, qqFields[:], v[:]); err != nil {
		return "", err
	}
	if op := parseID(v[0]); op.kind != kindAbsent && !op.isNumber("0") {
		return "", fmt.Errorf("%w: qq op %s", ErrNotAMessage, op.text)
	}
	return parseID(v[1]).require("qq event", "id")
}

type qqVerifier struct {
	key ed25519.PrivateKey
	pub ed25519.PublicKey
}

func newQQVerifier(secret string) (verifier, error) {
	seed := secret
	for len(seed) < ed25519.SeedSize {
		seed += seed
	}
	key := ed25519.NewKeyFromSeed([]byte(seed[:ed25519.SeedSize]))
	return qqVerifier{key, key.Public().(ed25519.PublicKey)}, nil
}

func (v qqVerifier) verify(p *Preset, body []byte, h http.Header, now time.Time) ([]byte, error) {
	if h.Get("X-Signature-Ed25519") == "" && h.Get("X-Signature-Timestamp") == "" {
		if _, ok := qqValidation(body); ok {
			return body, nil // unsigned by QQ; Answer is safe to call on it
		}
	}
	if !startsObject(body) {
		return nil, unauthenticated("qq", "body is not a JSON object")
	}
	return verifyEd25519(p, "qq", v.pub, body, h, now)
}

// answer answers a callback URL validation.
func (v qqVerifier) answer(body []byte) ([]byte, bool) {
	val, ok := qqValidation(body)
	if !ok {
		return nil, false
	}
	sig := ed25519.Sign(v.key, []byte(val.EventTS+val.PlainToken))
	resp, err := json.Marshal(qqValidationAnswer{PlainToken: val.PlainToken, Signature: hex.EncodeToString(sig)})
	return resp, err == nil
}

type qqValidationRequest struct{ PlainToken, EventTS string }

type qqValidationAnswer struct {
	PlainToken string `json:"plain_token"`
	Signature  string `json:"signature"`
}

var qqValidationFields = [...]string{"plain_token", "event_ts"}

// qqValidation returns the fields of an op 13 body whose event_ts is digits
// and whose plain_token is printable ASCII that cannot open a JSON value
// other than a number or a literal.
func qqValidation(body []byte) (qqValidationRequest, bool) {
	var v [len(qqFields)][]byte
	var d [len(qqValidationFields)][]byte
	if decodeBody("qq", body, qqFields[:], v[:]) != nil || !parseID(v[0]).isNumber("13") ||
		object("qq", "d", v[2], qqValidationFields[:], d[:]) != nil {
		return qqValidationRequest{}, false
	}
	token, err1 := stringField("qq", "plain_token", d[0])
	ts, err2 := stringField("qq", "event_ts", d[1])
	if d[1] != nil && d[1][0] != '"' { // event_ts sent as a number
		ts, err2 = string(d[1]), nil
	}
	ok := err1 == nil && err2 == nil && token != "" && len(token) <= 256 && len(ts) <= 20 &&
		jsonscan.IsInteger(ts) && ts[0] != '-' && !strings.ContainsAny(token, `{}[]"\`)
	for i := 0; ok && i < len(token); i++ {
		ok = token[i] > ' ' && token[i] < 0x7f
	}
	return qqValidationRequest{PlainToken: token, EventTS: ts}, ok
}
