package platform

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// DingTalkEvents is the preset for DingTalk's HTTP event subscriptions (事件订阅,
// HTTP 推送): the events DingTalk posts, encrypted, to an app's request URL,
// {"encrypt": "…"}, signed in the URL query (Configure event subscription,
// 配置事件订阅, https://open.dingtalk.com/document/orgapp/configure-event-subcription;
// open-dingtalk/DingTalk-Callback-Crypto does the same). For a robot's
// messages, see [DingTalk].
//
// Key: DingTalk names no event id for HTTP pushes. The plaintext, a JSON
// object with EventType ("user_add_org", "bpms_task_change", …) and the
// event's members, is keyed as "{EventType}:{digest}", digest the first 16
// bytes of its SHA-256 in hex: a retry repeats the event (re-encrypted with
// new random bytes, which the digest does not see), while two events differ
// in their members. The URL check, EventType "check_url", is [ErrNotAMessage],
// and [Preset.Answer] answers it; so are the suite checks of old third-party
// apps (check_create_suite_url, check_update_suite_url), which the handler
// answers with [Preset.Seal] of their Random.
//
// TTL 24 h, the library's [dedupe.DefaultTTL]: DingTalk retries failed
// pushes but publishes no schedule (it lists the events it gave up on:
// "获取推送失败的事件列表",
// https://open.dingtalk.com/document/orgapp-server/obtain-the-event-list-of-failed-push-messages).
// The signed timestamp must be within the TTL of now.
//
// AckBudget 500 ms: DingTalk asks for the answer "在1500ms内" (within 1500
// ms; Configure event subscription); a second is left to answer.
//
// Replay is set: every event is answered with the encrypted "success"
// (Seal([]byte("success"), now)), or DingTalk takes the push as failed, so
// a copy must get the first answer rather than an empty 200.
//
// Secret: the subscription's token and aes_key, and the app's AppKey (the
// CorpId for an old "register callback" app, the suiteKey for a third-party
// app), given with [Preset.WithMsgCrypt]. The query's msg_signature (or
// signature), the hex SHA-1 of token, timestamp (milliseconds), nonce and
// the body's encrypt, sorted and concatenated, is checked before decrypting,
// and the plaintext must end with the AppKey (see wxcrypt.go). Verify with
// [Preset.VerifyRequest], not [Preset.Verify].
var DingTalkEvents = Preset{
	Name:             "dingtalk-events",
	TTL:              dedupe.DefaultTTL,
	AckBudget:        500 * time.Millisecond,
	Replay:           true,
	MessageID:        dingtalkEventID,
	newVerifier:      newDingTalkEventsVerifier,
	newCryptVerifier: func(c *msgCrypt) verifier { return &dingtalkEventsVerifier{c} },
}

var (
	dingtalkEventFields   = [...]string{"EventType"}
	dingtalkEncryptFields = [...]string{"encrypt"}
)

// dingtalkEventType returns the EventType of a plaintext.
func dingtalkEventType(body []byte) (string, error) {
	var v [len(dingtalkEventFields)][]byte
	if err := decodeBody("dingtalk-events", body, dingtalkEventFields[:], v[:]); err != nil {
		return "", err
	}
	return stringField("dingtalk-events", "EventType", v[0])
}

func dingtalkEventID(body []byte, _ http.Header) (string, error) {
	typ, err := dingtalkEventType(body)
	switch {
	case err != nil:
		return "", err
	case typ == "check_url" || typ == "check_create_suite_url" || typ == "check_update_suite_url":
		return "", fmt.Errorf("%w: dingtalk-events %s", ErrNotAMessage, typ)
	case typ == "":
		var enc [len(dingtalkEncryptFields)][]byte
		if decodeBody("dingtalk-events", body, dingtalkEncryptFields[:], enc[:]) == nil && enc[0] != nil {
			return "", fmt.Errorf("%w: dingtalk-events body is encrypted: decrypt it first (Preset.WithMsgCrypt, Preset.VerifyRequest)", dedupe.ErrNoMessageID)
		}
		return "", fmt.Errorf("%w: dingtalk-events event has no EventType", dedupe.ErrNoMessageID)
	case !eventOK(typ):
		return "", fmt.Errorf("%w: dingtalk-events EventType %q is not a word", dedupe.ErrInvalidKey, typ)
	}
	sum := sha256.Sum256(body)
	return typ + ":" + hex.EncodeToString(sum[:16]), nil
}

func newDingTalkEventsVerifier(string) (verifier, error) {
	return nil, unauthenticated("dingtalk-events", "needs a token, an aes_key and an AppKey: use Preset.WithMsgCrypt, not WithSecret")
}

// dingtalkEventsVerifier holds the WXBizMsgCrypt of an event subscription.
type dingtalkEventsVerifier struct{ crypt *msgCrypt }

func (v *dingtalkEventsVerifier) verify(*Preset, []byte, http.Header, time.Time) ([]byte, error) {
	return nil, needsQuery("dingtalk-events")
}

func (v *dingtalkEventsVerifier) verifyQuery(p *Preset, body []byte, _ http.Header, q url.Values, now time.Time) ([]byte, error) {
	s, err := wxReadQuery(p.Name, q, []string{"msg_signature", "signature"}, []string{"timestamp", "timeStamp"})
	if err != nil {
		return nil, err
	}
	var enc [len(dingtalkEncryptFields)][]byte
	if decodeBody(p.Name, body, dingtalkEncryptFields[:], enc[:]) != nil {
		return nil, unauthenticated(p.Name, "body is not a JSON object")
	}
	encrypt, err := stringField(p.Name, "encrypt", enc[0])
	if err != nil || encrypt == "" {
		return nil, unauthenticated(p.Name, "body has no encrypt")
	}
	if err := s.check(p, "msg_signature", now, v.crypt.token, s.ts, s.nonce, encrypt); err != nil {
		return nil, err
	}
	plain, err := v.crypt.decrypt(encrypt)
	if err != nil {
		return nil, unauthenticated(p.Name, "encrypt "+err.Error())
	}
	if !jsonscan.Valid(plain, maxDepth) || !startsObject(plain) {
		return nil, unauthenticated(p.Name, "plaintext is not a JSON object")
	}
	return plain, nil
}

// answer answers the URL check with the encrypted "success".
func (v *dingtalkEventsVerifier) answer(body []byte) ([]byte, bool) {
	if typ, err := dingtalkEventType(body); err != nil || typ != "check_url" {
		return nil, false
	}
	resp, err := sealJSON(v.crypt, []byte("success"), time.Now())
	return resp, err == nil
}

func (v *dingtalkEventsVerifier) seal(msg []byte, now time.Time) ([]byte, error) {
	return sealJSON(v.crypt, msg, now)
}
