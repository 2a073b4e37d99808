// Package platformtest makes webhook deliveries as the chat platforms do,
// signed (and, for Feishu, WeChat, WeCom and DingTalk's event subscriptions,
// encrypted) with a secret, so that tests can drive
// a handler behind [platform.Preset.Verify] or the dedupehttp middleware with
// authentic and forged requests. It is for tests: the secrets it derives are
// not secret.
package platformtest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe/platform"
)

// A Signer signs deliveries as one platform's servers do, with one secret. A
// Signer is safe for concurrent use.
type Signer struct {
	platform string
	secret   string
	key      ed25519.PrivateKey // Discord, QQ and Standard Webhooks v1a
	crypt    *msgCrypt          // WeChat, WeCom and DingTalk's event subscriptions
}

// msgCrypt is a WXBizMsgCrypt configuration: what [Signer.MsgCrypt] returns.
type msgCrypt struct {
	token, encodingAESKey, receiver string
}

// NewSigner returns a Signer for the platform named name ("telegram", "slack",
// "feishu", "discord", "onebot", "qq", "line", "meta", "matrix", "github",
// "stripe", "dingtalk" for a DingTalk robot, "webhooks" for Standard
// Webhooks' symmetric scheme v1 or "webhooks-v1a" for its asymmetric one,
// and "wechat", "wecom" and "dingtalk-events", which encrypt with
// WXBizMsgCrypt: see [Signer.MsgCrypt]) whose secret is derived from seed:
// seed itself, except for Discord and "webhooks-v1a", whose secret is a
// public key: the one of the Ed25519 key whose seed is SHA-256(seed)
// (written "whpk_" and its base64 for "webhooks-v1a"), and for "webhooks",
// whose secret is "whsec_" and the base64 of seed. For Feishu the secret is used
// as the Encrypt Key by [Signer.Encrypt] and [Signer.Sign], and as the
// Verification Token by [Signer.Token].
func NewSigner(name, seed string) *Signer {
	s := &Signer{platform: name, secret: seed}
	switch name {
	case "discord", "webhooks-v1a":
		sum := sha256.Sum256([]byte(seed))
		s.key = ed25519.NewKeyFromSeed(sum[:])
		s.secret = hex.EncodeToString(s.key.Public().(ed25519.PublicKey))
		if name == "webhooks-v1a" {
			s.secret = "whpk_" + base64.StdEncoding.EncodeToString(s.key.Public().(ed25519.PublicKey))
		}
	case "webhooks":
		s.secret = "whsec_" + base64.StdEncoding.EncodeToString([]byte(seed))
	case "wechat", "wecom", "dingtalk-events":
		sum := sha256.Sum256([]byte(seed))
		s.crypt = &msgCrypt{
			token:          seed,
			encodingAESKey: base64.RawStdEncoding.EncodeToString(sum[:]),
			receiver:       map[string]string{"wechat": "wx", "wecom": "ww", "dingtalk-events": "ding"}[name] + hex.EncodeToString(sum[:8]),
		}
	case "qq":
		full := seed
		for len(full) < ed25519.SeedSize {
			full += full
		}
		s.key = ed25519.NewKeyFromSeed([]byte(full[:ed25519.SeedSize]))
	}
	return s
}

// Secret returns the secret to give the platform's preset with
// [platform.Preset.WithSecret].
func (s *Signer) Secret() string { return s.secret }

// Preset returns p with the Signer's secret, or, for WeChat, WeCom and
// DingTalk's event subscriptions, with its [Signer.MsgCrypt] given to
// [platform.Preset.WithMsgCrypt].
func (s *Signer) Preset(p platform.Preset) platform.Preset {
	if s.crypt != nil {
		return p.WithMsgCrypt(s.MsgCrypt())
	}
	return p.WithSecret(s.secret)
}

// MsgCrypt returns the WXBizMsgCrypt configuration of a Signer for "wechat",
// "wecom" or "dingtalk-events", as [platform.Preset.WithMsgCrypt] takes it:
// the token is the seed, the EncodingAESKey the unpadded base64 of
// SHA-256(seed), and the receiver id (AppID, CorpID, AppKey) "wx", "ww" or
// "ding" and 16 hex digits of that hash. For another platform it returns
// empty strings.
func (s *Signer) MsgCrypt() (token, encodingAESKey, receiverID string) {
	if s.crypt == nil {
		return "", "", ""
	}
	return s.crypt.token, s.crypt.encodingAESKey, s.crypt.receiver
}

// Sign returns the headers with which the platform delivers body at time now:
// the secret token (Telegram) or bearer token (Matrix's hs_token), or the
// signature and its timestamp, and
// Content-Type. For GitHub and Standard Webhooks, whose id is a header, the
// id is derived from body (see [Signer.SignID]). For Feishu, body is signed as it is: encrypt it first with
// [Signer.Encrypt] to sign an encrypted delivery.
func (s *Signer) Sign(body []byte, now time.Time) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	ts := strconv.FormatInt(now.Unix(), 10)
	switch s.platform {
	case "telegram":
		h.Set("X-Telegram-Bot-Api-Secret-Token", s.secret)
	case "slack":
		mac := hmac.New(sha256.New, []byte(s.secret))
		mac.Write([]byte("v0:" + ts + ":"))
		mac.Write(body)
		h.Set("X-Slack-Request-Timestamp", ts)
		h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	case "feishu":
		nonce := "n" + ts
		sum := sha256.Sum256(append([]byte(ts+nonce+s.secret), body...))
		h.Set("X-Lark-Request-Timestamp", ts)
		h.Set("X-Lark-Request-Nonce", nonce)
		h.Set("X-Lark-Signature", hex.EncodeToString(sum[:]))
	case "discord", "qq":
		h.Set("X-Signature-Timestamp", ts)
		h.Set("X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(s.key, append([]byte(ts), body...))))
	case "onebot":
		mac := hmac.New(sha1.New, []byte(s.secret))
		mac.Write(body)
		h.Set("X-Signature", "sha1="+hex.EncodeToString(mac.Sum(nil)))
	case "line":
		mac := hmac.New(sha256.New, []byte(s.secret))
		mac.Write(body)
		h.Set("X-Line-Signature", base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	case "meta":
		mac := hmac.New(sha256.New, []byte(s.secret))
		mac.Write(body)
		h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	case "matrix":
		h.Set("Authorization", "Bearer "+s.secret)
	case "dingtalk":
		ms := strconv.FormatInt(now.UnixMilli(), 10)
		mac := hmac.New(sha256.New, []byte(s.secret))
		mac.Write([]byte(ms + "\n" + s.secret))
		h.Set("Timestamp", ms)
		h.Set("Sign", base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	case "stripe":
		mac := hmac.New(sha256.New, []byte(s.secret))
		mac.Write([]byte(ts + "."))
		mac.Write(body)
		h.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(mac.Sum(nil)))
	case "github", "webhooks", "webhooks-v1a":
		sum := sha256.Sum256(body)
		return s.SignID(hex.EncodeToString(sum[:16]), body, now)
	}
	return h
}

// SignID returns the headers with which GitHub or a Standard Webhooks sender
// delivers body at time now under the id id: X-GitHub-Delivery and
// X-Hub-Signature-256, or webhook-id, webhook-timestamp and
// webhook-signature. For another platform it returns what [Signer.Sign]
// does.
func (s *Signer) SignID(id string, body []byte, now time.Time) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	ts := strconv.FormatInt(now.Unix(), 10)
	switch s.platform {
	case "github":
		mac := hmac.New(sha256.New, []byte(s.secret))
		mac.Write(body)
		h.Set("X-GitHub-Delivery", id)
		h.Set("X-GitHub-Event", "push")
		h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	case "webhooks":
		key, _ := base64.StdEncoding.DecodeString(s.secret[len("whsec_"):])
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "."))
		mac.Write(body)
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	case "webhooks-v1a":
		sig := ed25519.Sign(s.key, append([]byte(id+"."+ts+"."), body...))
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", "v1a,"+base64.StdEncoding.EncodeToString(sig))
	default:
		return s.Sign(body, now)
	}
	return h
}

// Encrypt returns the body Feishu sends for plaintext when the app's Encrypt
// Key is the Signer's secret: {"encrypt": base64(iv ‖ AES-256-CBC(plaintext))}
// with the key SHA-256(Encrypt Key) and PKCS#7 padding. The IV is derived
// from the plaintext, so equal plaintexts give equal bodies.
func (s *Signer) Encrypt(plaintext []byte) []byte {
	key := sha256.Sum256([]byte(s.secret))
	block, _ := aes.NewCipher(key[:])
	pad := aes.BlockSize - len(plaintext)%aes.BlockSize
	data := make([]byte, aes.BlockSize, aes.BlockSize+len(plaintext)+pad)
	ivSum := sha256.Sum256(plaintext)
	copy(data, ivSum[:aes.BlockSize])
	data = append(data, plaintext...)
	for range pad {
		data = append(data, byte(pad))
	}
	ct := data[aes.BlockSize:]
	cipher.NewCBCEncrypter(block, data[:aes.BlockSize]).CryptBlocks(ct, ct)
	b, _ := json.Marshal(map[string]string{"encrypt": base64.StdEncoding.EncodeToString(data)})
	return b
}

// Token returns the Signer's secret as a Feishu Verification Token, to put in
// a plain body (header.token in the 2.0 schema, token in the 1.0 schema).
func (s *Signer) Token() string { return s.secret }

// SignQuery returns the URL query and the body with which WeChat (safe mode),
// WeCom or DingTalk's event subscriptions deliver msg at time now: msg
// encrypted with WXBizMsgCrypt for the Signer's receiver id, in
// <xml><Encrypt> (WeChat, WeCom) or {"encrypt": …} (DingTalk), and the
// query's msg_signature, the hex SHA-1 of token, timestamp, nonce and
// ciphertext, sorted and concatenated, beside timestamp (in milliseconds for
// DingTalk) and nonce; WeChat adds its plain signature and encrypt_type=aes
// (WeChat Official Accounts, Message encryption and decryption,
// https://developers.weixin.qq.com/doc/offiaccount/Message_Management/Message_encryption_and_decryption_instructions.html).
// The random bytes of the plaintext and the nonce are derived from msg and
// now, so equal arguments give equal deliveries. For another platform it
// returns nil, nil.
func (s *Signer) SignQuery(msg []byte, now time.Time) (url.Values, []byte) {
	if s.crypt == nil {
		return nil, nil
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	if s.platform == "dingtalk-events" {
		ts = strconv.FormatInt(now.UnixMilli(), 10)
	}
	sum := sha256.Sum256(append([]byte(ts), msg...))
	nonce := strconv.FormatUint(binary.BigEndian.Uint64(sum[:8])%1e10, 10)
	enc := s.crypt.encrypt(msg, sum[8:24])
	q := url.Values{"timestamp": {ts}, "nonce": {nonce}, "msg_signature": {wxSign(s.crypt.token, ts, nonce, enc)}}
	switch s.platform {
	case "wechat":
		q.Set("signature", wxSign(s.crypt.token, ts, nonce))
		q.Set("encrypt_type", "aes")
	case "dingtalk-events":
		b, _ := json.Marshal(map[string]string{"encrypt": enc})
		return q, b
	}
	return q, []byte("<xml><ToUserName><![CDATA[" + s.crypt.receiver + "]]></ToUserName><Encrypt><![CDATA[" + enc + "]]></Encrypt></xml>")
}

// encrypt is WXBizMsgCrypt's: base64(AES-256-CBC(random ‖ uint32 length of
// msg ‖ msg ‖ receiver id)), PKCS#7-padded to 32 bytes, the IV the key's
// first 16 bytes.
func (c *msgCrypt) encrypt(msg, random []byte) string {
	key, _ := base64.StdEncoding.DecodeString(c.encodingAESKey + "=")
	plain := append([]byte(nil), random[:16]...)
	plain = binary.BigEndian.AppendUint32(plain, uint32(len(msg)))
	plain = append(append(plain, msg...), c.receiver...)
	pad := 32 - len(plain)%32
	for range pad {
		plain = append(plain, byte(pad))
	}
	block, _ := aes.NewCipher(key)
	cipher.NewCBCEncrypter(block, key[:aes.BlockSize]).CryptBlocks(plain, plain)
	return base64.StdEncoding.EncodeToString(plain)
}

// wxSign is the hex SHA-1 of parts, sorted and concatenated.
func wxSign(parts ...string) string {
	sort.Strings(parts)
	sum := sha1.Sum([]byte(strings.Join(parts, "")))
	return hex.EncodeToString(sum[:])
}
