package platform

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe"
)

// DingTalk is the preset for a DingTalk robot's message receiving address:
// the JSON DingTalk posts when a user @-mentions the robot (Receive messages,
// 接收消息的消息协议, https://open.dingtalk.com/document/isvapp/receive-message).
// For DingTalk's HTTP event subscriptions, see [DingTalkEvents].
//
// Key: the message's msgId, "加密的消息ID" (the encrypted message id).
//
// TTL 24 h, the library's [dedupe.DefaultTTL]: DingTalk publishes no
// redelivery schedule for the robot, and the TTL must outlast the hour a
// signed timestamp is accepted (below), so that a replay within it is found
// a duplicate.
//
// AckBudget 500 ms: DingTalk names no deadline for the robot's POST; the
// preset keeps to the one it names for its callbacks, an answer "在1500ms内"
// (within 1500 ms; Configure event subscription, 配置事件订阅,
// https://open.dingtalk.com/document/orgapp/configure-event-subcription), and
// leaves a second of it to answer.
//
// Replay is set: the robot's answer, a message in the body of the HTTP
// response, is shown in the conversation.
//
// Secret: the robot's AppSecret. DingTalk sends the headers timestamp,
// "消息发送的时间戳，单位是毫秒" (the time the message was sent, in
// milliseconds), and sign, the base64 of the HMAC-SHA256 of timestamp + "\n"
// + AppSecret keyed with the AppSecret, and asks: "timestamp 与系统当前时间戳如果相差1小时以上，则认为是非法的请求"
// (a timestamp more than an hour from now is an illegal request) and "sign
// 与开发者自己计算的结果不一致，则认为是非法的请求" (so is a sign that differs).
// [Preset.Verify] checks both, the sign in constant time, and refuses a
// timestamp that is not 13 digits: read as seconds, a 10-digit one would
// fall within the hour, though DingTalk never sends one. The sign does not
// cover the body: whoever captured one request can post any body under its
// headers for an hour. Serve the robot over TLS only.
var DingTalk = Preset{
	Name:        "dingtalk",
	TTL:         dedupe.DefaultTTL,
	AckBudget:   500 * time.Millisecond,
	Replay:      true,
	MessageID:   dingtalkMessageID,
	newVerifier: func(secret string) (verifier, error) { return dingtalkVerifier{[]byte(secret)}, nil },
}

// dingtalkWindow is how far from now a robot's timestamp may be.
const dingtalkWindow = time.Hour

var dingtalkFields = [...]string{"msgId"}

func dingtalkMessageID(body []byte, _ http.Header) (string, error) {
	var v [len(dingtalkFields)][]byte
	if err := decodeBody("dingtalk", body, dingtalkFields[:], v[:]); err != nil {
		return "", err
	}
	return parseID(v[0]).require("dingtalk robot message", "msgId")
}

type dingtalkVerifier struct{ secret []byte }

func (v dingtalkVerifier) verify(_ *Preset, body []byte, h http.Header, now time.Time) ([]byte, error) {
	ts := h.Get("timestamp")
	if err := checkMillis("dingtalk", "timestamp", ts, now, dingtalkWindow); err != nil {
		return nil, err
	}
	got := h.Get("sign")
	if got == "" {
		return nil, unauthenticated("dingtalk", "request has no sign")
	}
	sig, err := base64.StdEncoding.DecodeString(got)
	if err != nil || len(sig) != sha256.Size {
		return nil, unauthenticated("dingtalk", "sign is not the base64 of 32 bytes")
	}
	mac := hmac.New(sha256.New, v.secret)
	mac.Write([]byte(ts + "\n"))
	mac.Write(v.secret)
	if subtle.ConstantTimeCompare(sig, mac.Sum(nil)) != 1 {
		return nil, unauthenticated("dingtalk", "sign does not match")
	}
	return body, nil
}
