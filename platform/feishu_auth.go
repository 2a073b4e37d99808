package platform

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// How a Feishu delivery is authenticated (Feishu Open Platform, "Receive
// events" (接收事件), 安全校验 and 解密; the oapi-sdk-go event package does
// the same):
//
//   - An encrypted body, {"encrypt": base64(iv ‖ AES-256-CBC(plaintext))}
//     with the key SHA-256(Encrypt Key) and PKCS#7 padding, is decrypted; the
//     padding is checked and the plaintext must be a JSON object. Event pushes
//     are signed: X-Lark-Signature is the hex SHA-256 of
//     X-Lark-Request-Timestamp ‖ X-Lark-Request-Nonce ‖ Encrypt Key ‖ body,
//     checked before decrypting, with the timestamp at most the TTL from now.
//     The documentation exempts the request URL check from the signature
//     ("不包括请求网址校验"), so an encrypted delivery without
//     X-Lark-Signature is accepted only when its plaintext is a
//     url_verification; any other is refused.
//   - A plain body must carry the Verification Token: header.token in the
//     2.0 schema, token in the 1.0 schema and in url_verification.
//
// Every failure to decrypt (base64, length, padding, JSON) gives the same
// error, and the padding is checked in constant time, so that the answers do
// not make a padding oracle.

// feishuVerifier holds the secret: an Encrypt Key or a Verification Token.
type feishuVerifier struct {
	secret []byte
	aesKey [sha256.Size]byte // SHA-256 of the secret, as an Encrypt Key
}

func newFeishuVerifier(secret string) (verifier, error) {
	return &feishuVerifier{secret: []byte(secret), aesKey: sha256.Sum256([]byte(secret))}, nil
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
		return v.checkToken(body)
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
		var t [len(feishuTokenFields)][]byte
		_ = decodeBody("feishu", plain, feishuTokenFields[:], t[:]) // plain is a valid JSON object
		if typ, _ := stringField("feishu", "type", t[3]); typ != "url_verification" {
			return nil, unauthenticated("feishu", "encrypted event has no X-Lark-Signature")
		}
	}
	return plain, nil
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

// checkToken checks the Verification Token of a plain body.
func (v *feishuVerifier) checkToken(body []byte) ([]byte, error) {
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
	if subtle.ConstantTimeCompare([]byte(token), v.secret) != 1 {
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
	plain, padded := unpad(ct)
	valid := jsonscan.Valid(plain, maxDepth) // run whatever the padding, for even timing
	if !padded || !valid {
		return nil, false
	}
	if !startsObject(plain) {
		return nil, false
	}
	return plain, true
}

// unpad removes PKCS#7 padding from b, a whole number of blocks, checking it
// in constant time. When the padding is wrong it returns b whole and false.
func unpad(b []byte) ([]byte, bool) {
	n := len(b)
	pad := int(b[n-1])
	good := subtle.ConstantTimeLessOrEq(1, pad) & subtle.ConstantTimeLessOrEq(pad, aes.BlockSize)
	for i := 1; i <= aes.BlockSize; i++ {
		inPad := subtle.ConstantTimeLessOrEq(i, pad)
		same := subtle.ConstantTimeByteEq(b[n-i], byte(pad))
		good &= subtle.ConstantTimeSelect(inPad, same, 1)
	}
	if good != 1 {
		return b, false
	}
	return b[:n-pad], true
}
