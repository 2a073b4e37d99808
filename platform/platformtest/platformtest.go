// Package platformtest makes webhook deliveries as the chat platforms do,
// signed (and, for Feishu, encrypted) with a secret, so that tests can drive
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
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gatewaykit/dedupe/platform"
)

// A Signer signs deliveries as one platform's servers do, with one secret. A
// Signer is safe for concurrent use.
type Signer struct {
	platform string
	secret   string
	key      ed25519.PrivateKey // Discord, QQ and Standard Webhooks v1a
}

// NewSigner returns a Signer for the platform named name ("telegram", "slack",
// "feishu", "discord", "onebot", "qq", "line", "meta", "matrix", "github",
// "stripe", "webhooks" for Standard Webhooks' symmetric scheme v1 or
// "webhooks-v1a" for its asymmetric one) whose secret is derived from seed:
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

// Preset returns p with the Signer's secret.
func (s *Signer) Preset(p platform.Preset) platform.Preset { return p.WithSecret(s.secret) }

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
