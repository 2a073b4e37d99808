package platform

import (
	"net/http"
	"net/url"
	"time"
)

// WeCom is the preset for a WeCom (企业微信) app's callback URL (接收消息服务器):
// the encrypted XML messages and events WeCom posts to it (Receiving
// messages and events, 接收消息与事件,
// https://developer.work.weixin.qq.com/document/path/90238).
//
// Key: as for [WeChat], which WeCom follows (wechatpy and WxJava de-duplicate
// both alike: "如果有MsgId就用MsgId排重，如果没有就用FromUserName+CreateTime排重",
// binarywang/WxJava wiki, 消息排重): a message's MsgId, an event's
// "event:{FromUserName}:{CreateTime}:{Event}:{digest}", with digest the first
// 16 bytes of the SHA-256 of its XML. The digest matters more here than on
// WeChat: WeCom's system events come from FromUserName "sys" (contact
// changes, approvals), several in one second, and only their other elements
// (ChangeType, UserID, …) tell them apart.
//
// TTL 10 min: "企业微信服务器在五秒内收不到响应会断掉连接，并且重新发起请求，总共重试三次"
// (WeCom drops the connection when it gets no answer within five seconds and
// sends the request again, three times in all; Receiving messages and
// events): the retries end within about 15 seconds, and ten minutes cover
// them with margin. The signed timestamp must be within the TTL of now.
//
// AckBudget 3 s: WeCom waits five seconds; two are left for the network and
// the answer.
//
// Replay is set: the answer may be a passive reply the user sees.
//
// Secret: WeCom always encrypts. Give the callback's Token and
// EncodingAESKey, and the CorpID (the suite id for a third-party app's
// instruction callback), with [Preset.WithMsgCrypt]; [Preset.WithSecret] makes
// the preset refuse every delivery. msg_signature, the hex SHA-1 of token,
// timestamp, nonce and the body's Encrypt, sorted and concatenated, is
// checked before decrypting, and the plaintext must end with the CorpID
// (see wxcrypt.go). The signatures are in the URL query: verify with
// [Preset.VerifyRequest], not [Preset.Verify].
//
// URL check: when the callback URL is saved, WeCom sends GET
// ?msg_signature=…&timestamp=…&nonce=…&echostr=…, echostr encrypted, and
// expects its plaintext back within a second (回调配置,
// https://developer.work.weixin.qq.com/document/path/90930). VerifyRequest
// checks the signature over the echostr and decrypts it, and
// [Preset.Answer] answers the plaintext (WeCom's are digits; anything but a
// plain identifier is refused).
var WeCom = Preset{
	Name:             "wecom",
	TTL:              10 * time.Minute,
	AckBudget:        3 * time.Second,
	Replay:           true,
	MessageID:        wecomMessageID,
	newVerifier:      newWeComVerifier,
	newCryptVerifier: func(c *msgCrypt) verifier { return &wecomVerifier{c} },
}

func wecomMessageID(body []byte, _ http.Header) (string, error) { return wxMessageID("wecom", body) }

func newWeComVerifier(string) (verifier, error) {
	return nil, unauthenticated("wecom", "needs a Token, an EncodingAESKey and a CorpID: use Preset.WithMsgCrypt, not WithSecret")
}

// wecomVerifier holds the WXBizMsgCrypt of a WeCom callback.
type wecomVerifier struct{ crypt *msgCrypt }

func (v *wecomVerifier) verify(*Preset, []byte, http.Header, time.Time) ([]byte, error) {
	return nil, needsQuery("wecom")
}

func (v *wecomVerifier) verifyQuery(p *Preset, body []byte, _ http.Header, q url.Values, now time.Time) ([]byte, error) {
	s, err := wxReadQuery("wecom", q, []string{"msg_signature"}, []string{"timestamp"})
	if err != nil {
		return nil, err
	}
	if !q.Has("echostr") {
		return decryptXML(p, v.crypt, s, body, now)
	}
	echo, err := wxParam("wecom", q, "echostr")
	switch {
	case err != nil:
		return nil, err
	case len(body) != 0:
		return nil, unauthenticated("wecom", "URL check (echostr) has a body")
	}
	if err := s.check(p, "msg_signature", now, v.crypt.token, s.ts, s.nonce, echo); err != nil {
		return nil, err
	}
	plain, err := v.crypt.decrypt(echo)
	if err != nil {
		return nil, unauthenticated("wecom", "echostr "+err.Error())
	}
	return echoBody("wecom", string(plain))
}

func (v *wecomVerifier) answer(body []byte) ([]byte, bool) { return answerEcho(body) }

func (v *wecomVerifier) seal(msg []byte, now time.Time) ([]byte, error) {
	return sealXML(v.crypt, msg, now)
}
