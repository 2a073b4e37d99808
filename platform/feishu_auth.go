package platform

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// How a Feishu delivery is authenticated (Feishu Open Platform, "Receive
// events" (接收事件, 安全校验 and 解密),
// https://open.feishu.cn/document/ukTMukTMukTM/uYDNxYjL2QTM24iN0EjN/event-subscription-configure-/encrypt-key-encryption-configuration-case;
// "Configure the request URL" (配置请求地址),
// https://open.feishu.cn/document/ukTMukTMukTM/uYDNxYjL2QTM24iN0EjN/event-subscription-configure-/request-url-configuration-case;
// larksuite/oapi-sdk-go, event/dispatcher/dispatcher.go, does the same):
//
//   - An encrypted body, {"encrypt": base64(iv ‖ AES-256-CBC(plaintext))}
//     with the key SHA-256(Encrypt Key) and PKCS#7 padding, is decrypted; the
//     padding is checked and the plaintext must be a JSON object. Event pushes
//     are signed: X-Lark-Signature is the hex SHA-256 of
//     X-Lark-Request-Timestamp ‖ X-Lark-Request-Nonce ‖ Encrypt Key ‖ body,
//     checked before decrypting, with the timestamp at most the TTL from now.
//   - The documentation exempts the request URL check from the signature
//     ("不包括请求网址校验"), and the SDK checks the Verification Token inside
//     its plaintext instead. AES-CBC has no MAC: whoever captured one
//     encrypted body can rewrite the first 16 bytes of its plaintext by
//     flipping bits of its IV, without the key. So an encrypted delivery
//     without X-Lark-Signature is accepted only when its plaintext is a
//     url_verification whose token is the Verification Token (given with
//     [Preset.WithVerificationToken]; without it such a delivery is refused)
//     and whose challenge is a plain identifier, and Verify returns not the
//     plaintext but the three members rebuilt, which [Preset.Answer]
//     answers: nothing an attacker wrote reaches a handler.
//   - A plain body must carry the Verification Token: header.token in the
//     2.0 schema, token in the 1.0 schema and in url_verification. It is the
//     token of WithVerificationToken, or else the secret of WithSecret.
//
// Every failure to decrypt (base64, length, padding, JSON) gives the same
// error, and the padding is checked in constant time, so that the answers do
// not make a padding oracle.

// feishuVerifier holds the secret: an Encrypt Key or a Verification Token.
// secret is empty for a preset given only a Verification Token.
type feishuVerifier struct {
	secret []byte
	aesKey [sha256.Size]byte // SHA-256 of the secret, as an Encrypt Key
}

func newFeishuVerifier(secret string) (verifier, error) {
	return &feishuVerifier{secret: []byte(secret), aesKey: sha256.Sum256([]byte(secret))}, nil
}

// WithVerificationToken returns a copy of p that also knows the app's
// Verification Token, for Feishu (Feishu Open Platform, event subscription,
// 加密策略, holds an Encrypt Key and a Verification Token). Give it besides
// the Encrypt Key of [Preset.WithSecret]: Feishu sends its request URL check
// (url_verification) encrypted but unsigned, and the token inside it is
// what proves it comes from Feishu. [Preset.Verify] then accepts such a
// check only with that token, and [Preset.Answer] answers it, so the
// handler never sees it. Without an Encrypt Key, the token alone
// authenticates plain deliveries, as WithSecret(token) does. An empty token,
// or a preset of another platform, makes the copy refuse every delivery
// ([Preset.CheckSecret] says why).
func (p Preset) WithVerificationToken(token string) Preset {
	switch {
	case !p.takesToken:
		p.verifier = refusal{unauthenticated(p.Name, "has no verification token: WithVerificationToken is for Feishu")}
	case token == "":
		p.verifier = refusal{unauthenticated(p.Name, "verification token is empty")}
	default:
		p.token = token
		if p.verifier == nil {
			p.verifier = &feishuVerifier{}
		}
	}
	return p
}

var (
	feishuEncryptFields = [...]string{"encrypt"}
	feishuTokenFields   = [...]string{"schema", "token", "header", "type"}
	feishuHeaderToken   = [...]string{"token"}
)

func (v *feishuVerifier) verify(p *Preset, body []byte, h http.Header, now time.Time) ([]byte, error) {
	var enc [len(feishuEncryptFields)][]byte
	if decodeBody("feishu", body, feishuEncryptFields[:], enc[:]) != nil {
		return nil, unauthenticated("feishu", "body is not a JSON object")
	}
	encrypt, err := stringField("feishu", "encrypt", enc[0])
	if err != nil || encrypt == "" {
		return v.checkToken(p, body)
	}
	if len(v.secret) == 0 {
		return nil, unauthenticated("feishu", "body is encrypted, and the preset has no Encrypt Key (Preset.WithSecret)")
	}
	signed := h.Get("X-Lark-Signature") != ""
	if signed {
		if err := v.checkSignature(p, body, h, now); err != nil {
			return nil, err
		}
	}
	plain, ok := v.decrypt(encrypt)
	if !ok {
		return nil, unauthenticated("feishu", "body does not decrypt with the Encrypt Key")
	}
	if !signed {
		return checkChallenge(p, plain)
	}
	return plain, nil
}

// tokenInBody reports whether verify checks body with the Verification
// Token it carries: a plain body. An encrypted one is signed, or (unsigned)
// a url_verification that the preset answers itself.
func (v *feishuVerifier) tokenInBody(body []byte, _ http.Header) bool {
	var enc [len(feishuEncryptFields)][]byte
	if decodeBody("feishu", body, feishuEncryptFields[:], enc[:]) != nil {
		return true // refused by verify
	}
	encrypt, err := stringField("feishu", "encrypt", enc[0])
	return err != nil || encrypt == ""
}

// checkChallenge checks the plaintext of an encrypted delivery that came
// without a signature: only a url_verification with the Verification Token
// passes, rebuilt from its members.
func checkChallenge(p *Preset, plain []byte) ([]byte, error) {
	c, ok := parseChallenge(plain)
	switch {
	case !ok:
		return nil, unauthenticated("feishu", "encrypted event has no X-Lark-Signature")
	case p.token == "":
		return nil, unauthenticated("feishu", "url_verification is unsigned, and checking it needs the Verification Token (Preset.WithVerificationToken)")
	case subtle.ConstantTimeCompare([]byte(c.Token), []byte(p.token)) != 1:
		return nil, unauthenticated("feishu", "url_verification token does not match the Verification Token")
	}
	return json.Marshal(c)
}

// checkSignature checks X-Lark-Signature and its timestamp.
func (v *feishuVerifier) checkSignature(p *Preset, body []byte, h http.Header, now time.Time) error {
	ts := h.Get("X-Lark-Request-Timestamp")
	if err := checkTimestamp("feishu", "X-Lark-Request-Timestamp", ts, now, replayWindow(p)); err != nil {
		return err
	}
	sum := sha256.New()
	sum.Write([]byte(ts))
	sum.Write([]byte(h.Get("X-Lark-Request-Nonce")))
	sum.Write(v.secret)
	sum.Write(body)
	if !equalHex(h.Get("X-Lark-Signature"), sum.Sum(nil)) {
		return unauthenticated("feishu", "X-Lark-Signature does not match the body")
	}
	return nil
}

// checkToken checks the Verification Token of a plain body: p's token, or
// else the secret.
func (v *feishuVerifier) checkToken(p *Preset, body []byte) ([]byte, error) {
	var t [len(feishuTokenFields)][]byte
	var hdr [len(feishuHeaderToken)][]byte
	if decodeBody("feishu", body, feishuTokenFields[:], t[:]) != nil ||
		object("feishu", "header", t[2], feishuHeaderToken[:], hdr[:]) != nil {
		return nil, unauthenticated("feishu", "body is not the expected JSON")
	}
	raw := t[1]
	if schema, _ := stringField("feishu", "schema", t[0]); schema != "" {
		raw = hdr[0]
	}
	token, err := stringField("feishu", "token", raw)
	if err != nil || token == "" {
		return nil, unauthenticated("feishu", "body has no verification token")
	}
	want := v.secret
	if p.token != "" {
		want = []byte(p.token)
	}
	if len(want) == 0 || subtle.ConstantTimeCompare([]byte(token), want) != 1 {
		return nil, unauthenticated("feishu", "verification token does not match the secret")
	}
	return body, nil
}

// decrypt returns the plaintext of an encrypt member, which must be a JSON
// object. Whatever fails, it returns false alone.
func (v *feishuVerifier) decrypt(encrypt string) ([]byte, bool) {
	data, err := base64.StdEncoding.DecodeString(encrypt)
	if err != nil || len(data) < 2*aes.BlockSize || len(data)%aes.BlockSize != 0 {
		return nil, false
	}
	block, err := aes.NewCipher(v.aesKey[:])
	if err != nil {
		return nil, false
	}
	iv, ct := data[:aes.BlockSize], data[aes.BlockSize:]
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(ct, ct)
	plain, padded := unpad(ct, aes.BlockSize)
	valid := jsonscan.Valid(plain, maxDepth) // run whatever the padding, for even timing
	if !padded || !valid {
		return nil, false
	}
	if !startsObject(plain) {
		return nil, false
	}
	return plain, true
}

// unpad removes PKCS#7 padding to a multiple of block bytes (16 for Feishu,
// 32 for WXBizMsgCrypt) from b, which is at least block bytes long, checking
// it in constant time. When the padding is wrong it returns b whole and false.
func unpad(b []byte, block int) ([]byte, bool) {
	n := len(b)
	pad := int(b[n-1])
	good := subtle.ConstantTimeLessOrEq(1, pad) & subtle.ConstantTimeLessOrEq(pad, block)
	for i := 1; i <= block; i++ {
		inPad := subtle.ConstantTimeLessOrEq(i, pad)
		same := subtle.ConstantTimeByteEq(b[n-i], byte(pad))
		good &= subtle.ConstantTimeSelect(inPad, same, 1)
	}
	if good != 1 {
		return b, false
	}
	return b[:n-pad], true
}
