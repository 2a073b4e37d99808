package platform

import "encoding/json"

// Feishu's request URL check: {"challenge": "…", "token": "…", "type":
// "url_verification"}, answered with {"challenge": "…"} within a second
// (Feishu Open Platform, "Configure the request URL", 配置请求地址,
// https://open.feishu.cn/document/ukTMukTMukTM/uYDNxYjL2QTM24iN0EjN/event-subscription-configure-/request-url-configuration-case).
// With an Encrypt Key the check comes encrypted and unsigned; the preset
// answers it itself (see feishu_auth.go), so that what it echoes is a plain
// identifier and nothing of the plaintext reaches a handler.

// feishuChallenge is a url_verification, in the order Feishu writes it.
type feishuChallenge struct {
	Challenge string `json:"challenge"`
	Token     string `json:"token"`
	Type      string `json:"type"`
}

// maxChallenge bounds the challenge the preset echoes. Feishu's are UUIDs
// ("1b6aef1a-401f-406a-be41-f48911eabcef") or shorter.
const maxChallenge = 128

var feishuChallengeFields = [...]string{"challenge", "token", "type"}

// parseChallenge returns the url_verification body holds, if it is one whose
// challenge is at most maxChallenge letters, digits, '-' and '_': an
// identifier, never text that a rewritten or spliced ciphertext decrypted to.
func parseChallenge(body []byte) (feishuChallenge, bool) {
	var v [len(feishuChallengeFields)][]byte
	if decodeBody("feishu", body, feishuChallengeFields[:], v[:]) != nil {
		return feishuChallenge{}, false
	}
	var c feishuChallenge
	var err [3]error
	c.Challenge, err[0] = stringField("feishu", "challenge", v[0])
	c.Token, err[1] = stringField("feishu", "token", v[1])
	c.Type, err[2] = stringField("feishu", "type", v[2])
	ok := err[0] == nil && err[1] == nil && err[2] == nil && c.Type == "url_verification" &&
		c.Challenge != "" && len(c.Challenge) <= maxChallenge
	for i := 0; ok && i < len(c.Challenge); i++ {
		b := c.Challenge[i]
		ok = 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '-' || b == '_'
	}
	return c, ok
}

// answer answers a url_verification that Verify accepted: signed, with the
// Verification Token, or (encrypted and unsigned) rebuilt by checkChallenge.
// A challenge that is not a plain identifier is left to the handler, which
// only a signed or token-checked plain delivery can reach.
func (v *feishuVerifier) answer(body []byte) ([]byte, bool) {
	c, ok := parseChallenge(body)
	if !ok {
		return nil, false
	}
	resp, err := json.Marshal(struct {
		Challenge string `json:"challenge"`
	}{c.Challenge})
	return resp, err == nil
}
