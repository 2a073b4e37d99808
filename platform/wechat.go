package platform

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// WeChat is the preset for a WeChat Official Account's server configuration
// (公众号 服务器配置): the XML messages and events WeChat posts to it.
//
// Key: a message's MsgId; an event, which has none, by its FromUserName and
// CreateTime, as WeChat's documentation says: "关于重试的消息排重，推荐使用msgid排重"
// (de-duplicate retried messages by msgid; Receiving standard messages,
// https://developers.weixin.qq.com/doc/offiaccount/Message_Management/Receiving_standard_messages.html)
// and "关于重试的消息排重，推荐使用FromUserName + CreateTime 排重" (events, by
// FromUserName + CreateTime; Receiving event pushes,
// https://developers.weixin.qq.com/doc/offiaccount/Message_Management/Receiving_event_pushes.html).
// An event's key is "event:{FromUserName}:{CreateTime}:{Event}:{digest}",
// where digest is the first 16 bytes of the SHA-256 of the event's XML, in
// hex: a retry repeats the event whole, so it is one key, while two events
// of one user in one second (a menu CLICK and the VIEW after it, or two
// template messages' TEMPLATESENDJOBFINISH, whose MsgID is spelled with a
// capital D and is not read) are two. A message's key is its MsgId, digits.
//
// TTL 10 min: "微信服务器在五秒内收不到响应会断掉连接，并且重新发起请求，总共重试三次"
// (WeChat drops the connection when it gets no answer within five seconds,
// and sends the request again, three times in all; same pages): the retries
// end within about 15 seconds. Ten minutes cover them, and clocks that
// differ by minutes, with margin; the signed timestamp must be within the
// TTL of now, so a replay older than that is refused.
//
// AckBudget 3 s: WeChat waits five seconds; two are left for the network and
// the answer.
//
// Replay is set: the answer to a message is a passive reply (被动回复) that
// the user sees, so a retry must get the first answer.
//
// Secret: plain mode (明文模式) signs only the request, with the Token of the
// server configuration: give it with [Preset.WithSecret]. The query's
// signature is the hex SHA-1 of token, timestamp and nonce, sorted and
// concatenated; it does not cover the body, so in plain mode anyone who
// captured one request can post any body under its signature until its
// timestamp is older than the TTL. Use safe mode (安全模式), with
// [Preset.WithMsgCrypt](token, EncodingAESKey, AppID): the body's Encrypt is
// then signed (msg_signature) and decrypted (see wxcrypt.go), and the
// plaintext, whose AppID is checked, is what the preset keys and the handler
// reads; a body that is not encrypted is refused, so that a captured
// signature cannot downgrade it. Compatible mode (兼容模式) is served as safe
// mode. The signatures are in the URL query: verify with
// [Preset.VerifyRequest], not [Preset.Verify].
//
// URL check: when the server configuration is saved, WeChat sends GET
// ?signature=…&timestamp=…&nonce=…&echostr=… and expects echostr back (Access
// overview, 接入概述,
// https://developers.weixin.qq.com/doc/offiaccount/Basic_Information/Access_Overview.html).
// VerifyRequest checks its signature, and [Preset.Answer] then answers the
// echostr, if it is a plain identifier; MessageID calls it [ErrNotAMessage].
var WeChat = Preset{
	Name:             "wechat",
	TTL:              10 * time.Minute,
	AckBudget:        3 * time.Second,
	Replay:           true,
	MessageID:        wechatMessageID,
	newVerifier:      func(token string) (verifier, error) { return &wechatVerifier{token: token}, nil },
	newCryptVerifier: func(c *msgCrypt) verifier { return &wechatVerifier{token: c.token, crypt: c} },
}

// wxFields are the elements the WeChat and WeCom presets read.
var wxFields = [...]string{"MsgId", "FromUserName", "CreateTime", "Event", "Encrypt"}

func wechatMessageID(body []byte, _ http.Header) (string, error) { return wxMessageID("wechat", body) }

// wxMessageID is the MessageID of WeChat and WeCom.
func wxMessageID(name string, body []byte) (string, error) {
	if strings.HasPrefix(string(body), echoPrefix) {
		return "", fmt.Errorf("%w: %s URL check (echostr)", ErrNotAMessage, name)
	}
	var (
		v     [len(wxFields)]string
		found [len(wxFields)]bool
	)
	if err := xmlFields(name, body, wxFields[:], v[:], found[:]); err != nil {
		return "", err
	}
	msgID, from, created, event, encrypt := v[0], v[1], v[2], v[3], v[4]
	switch {
	case found[0]:
		if !digitsOK(msgID) || msgID[0] == '0' {
			return "", fmt.Errorf("%w: %s MsgId %q is not a positive integer", dedupe.ErrInvalidKey, name, msgID)
		}
		return msgID, nil
	case found[3]:
		if !userOK(from) || !digitsOK(created) || !eventOK(event) {
			return "", fmt.Errorf("%w: %s event: FromUserName %q, CreateTime %q or Event %q has characters the platform does not use",
				dedupe.ErrInvalidKey, name, from, created, event)
		}
		sum := sha256.Sum256(body)
		return "event:" + from + ":" + created + ":" + event + ":" + hex.EncodeToString(sum[:16]), nil
	case encrypt != "":
		return "", fmt.Errorf("%w: %s body is encrypted: decrypt it first (Preset.WithMsgCrypt, Preset.VerifyRequest)", dedupe.ErrNoMessageID, name)
	}
	return "", fmt.Errorf("%w: %s body has neither MsgId nor Event", dedupe.ErrNoMessageID, name)
}

// userOK reports whether s can be a FromUserName: an OpenID (letters,
// digits, '-' and '_') or a WeCom UserID (also '@' and '.'), at most 64
// bytes, never ':', which ends it in a key.
func userOK(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_@.", c) >= 0) {
			return false
		}
	}
	return s != "" && len(s) <= 64
}

// eventOK reports whether s can be an event type: letters, digits and '_',
// at most 64 bytes ("subscribe", "CLICK", "change_contact").
func eventOK(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return s != "" && len(s) <= 64
}

// wechatVerifier holds the Token, and the WXBizMsgCrypt of safe mode.
type wechatVerifier struct {
	token string
	crypt *msgCrypt // nil in plain mode
}

func (v *wechatVerifier) verify(*Preset, []byte, http.Header, time.Time) ([]byte, error) {
	return nil, needsQuery("wechat")
}

func (v *wechatVerifier) verifyQuery(p *Preset, body []byte, _ http.Header, q url.Values, now time.Time) ([]byte, error) {
	s, err := wxReadQuery("wechat", q, []string{"signature"}, []string{"timestamp"})
	if err != nil {
		return nil, err
	}
	echo, err := wxParam("wechat", q, "echostr")
	switch {
	case err != nil:
		return nil, err
	case q.Has("echostr"): // the URL check: plain in every mode
		if len(body) != 0 {
			return nil, unauthenticated("wechat", "URL check (echostr) has a body")
		}
		if err := s.check(p, "signature", now, v.token, s.ts, s.nonce); err != nil {
			return nil, err
		}
		return echoBody("wechat", echo)
	case v.crypt != nil:
		ms, err := wxParam("wechat", q, "msg_signature")
		if err != nil {
			return nil, err
		}
		s.sig = ms
		return decryptXML(p, v.crypt, s, body, now)
	}
	if err := s.check(p, "signature", now, v.token, s.ts, s.nonce); err != nil {
		return nil, err
	}
	if i := jsonscan.SkipSpace(body, 0); i >= len(body) || body[i] != '<' {
		return nil, unauthenticated("wechat", "body is not XML")
	}
	return body, nil
}

func (v *wechatVerifier) answer(body []byte) ([]byte, bool) { return answerEcho(body) }

func (v *wechatVerifier) seal(msg []byte, now time.Time) ([]byte, error) {
	if v.crypt == nil {
		return nil, unauthenticated("wechat", "is in plain mode: replies are not encrypted (Preset.WithMsgCrypt)")
	}
	return sealXML(v.crypt, msg, now)
}

// decryptXML checks the msg_signature (s.sig) of an encrypted WeChat or WeCom
// body, decrypts its Encrypt and returns the plaintext, which must be an
// <xml> document.
func decryptXML(p *Preset, c *msgCrypt, s signedQuery, body []byte, now time.Time) ([]byte, error) {
	var (
		enc   [1]string
		found [1]bool
	)
	if xmlFields(p.Name, body, []string{"Encrypt"}, enc[:], found[:]) != nil || enc[0] == "" {
		return nil, unauthenticated(p.Name, "body is not encrypted XML (safe mode expects <Encrypt>)")
	}
	if err := s.check(p, "msg_signature", now, c.token, s.ts, s.nonce, enc[0]); err != nil {
		return nil, err
	}
	msg, err := c.decrypt(enc[0])
	if err != nil {
		return nil, unauthenticated(p.Name, "Encrypt "+err.Error())
	}
	if xmlFields(p.Name, msg, nil, nil, nil) != nil {
		return nil, unauthenticated(p.Name, "plaintext is not an <xml> document")
	}
	return msg, nil
}
