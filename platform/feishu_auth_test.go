package platform_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// feishuCheck is the plaintext of Feishu's request URL check, as the
// documentation shows it (platform/testdata/feishu_url_verification.json).
const feishuCheck = `{"challenge":"ajls384kdjx98XX","token":"xxxxxx","type":"url_verification"}`

// flipIV rewrites the first block of the plaintext of an encrypted Feishu
// body from `from` to `to` (16 bytes each) by flipping bits of its IV, as
// anyone who captured the body can without the key.
func flipIV(t *testing.T, body []byte, from, to string) []byte {
	t.Helper()
	require.Len(t, from, 16)
	require.Len(t, to, 16)
	var e struct{ Encrypt string }
	require.NoError(t, json.Unmarshal(body, &e))
	raw, err := base64.StdEncoding.DecodeString(e.Encrypt)
	require.NoError(t, err)
	for i := range 16 {
		raw[i] ^= from[i] ^ to[i]
	}
	out, err := json.Marshal(map[string]string{"encrypt": base64.StdEncoding.EncodeToString(raw)})
	require.NoError(t, err)
	return out
}

// TestFeishuUnsignedChallenge checks what an encrypted delivery without
// X-Lark-Signature may be: only a url_verification with the Verification
// Token, which Verify rebuilds and Answer answers.
func TestFeishuUnsignedChallenge(t *testing.T) {
	s := platformtest.NewSigner("feishu", "encrypt-key")
	p := s.Preset(platform.Feishu).WithVerificationToken("xxxxxx")
	require.NoError(t, p.CheckSecret())
	check := s.Encrypt([]byte(feishuCheck))

	got, err := p.Verify(check, nil, now)
	require.NoError(t, err)
	assert.JSONEq(t, feishuCheck, string(got))
	answer, ok := p.Answer(got)
	require.True(t, ok, "the preset answers the check itself")
	assert.JSONEq(t, `{"challenge":"ajls384kdjx98XX"}`, string(answer))

	for name, c := range map[string]struct {
		p    platform.Preset
		body string
	}{
		"no Verification Token": {s.Preset(platform.Feishu), feishuCheck},
		"another token":         {p, `{"challenge":"ajls384kdjx98XX","token":"yyyyyy","type":"url_verification"}`},
		"no token":              {p, `{"challenge":"ajls384kdjx98XX","type":"url_verification"}`},
		"an event":              {p, `{"schema":"2.0","header":{"event_id":"e1","token":"xxxxxx"}}`},
		"no challenge":          {p, `{"token":"xxxxxx","type":"url_verification"}`},
		"challenge with quotes": {p, `{"challenge":"a\"b","token":"xxxxxx","type":"url_verification"}`},
		"challenge too long":    {p, `{"challenge":"` + string(make129()) + `","token":"xxxxxx","type":"url_verification"}`},
		"challenge a number":    {p, `{"challenge":1,"token":"xxxxxx","type":"url_verification"}`},
		"type twice":            {p, `{"challenge":"c","token":"xxxxxx","type":"url_verification","type":"x"}`},
	} {
		_, err := c.p.Verify(s.Encrypt([]byte(c.body)), nil, now)
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, name)
	}

	signed, err := s.Preset(platform.Feishu).Verify(check, s.Sign(check, now), now)
	require.NoError(t, err, "a signed check needs no token")
	_, ok = s.Preset(platform.Feishu).Answer(signed)
	assert.True(t, ok)

	plain, err := p.Verify([]byte(feishuCheck), nil, now)
	require.NoError(t, err, "a plain check carries the token")
	answer, ok = p.Answer(plain)
	require.True(t, ok)
	assert.JSONEq(t, `{"challenge":"ajls384kdjx98XX"}`, string(answer))
	_, ok = p.Answer([]byte(`{"challenge":"a b","token":"xxxxxx","type":"url_verification"}`))
	assert.False(t, ok, "a challenge that is not an identifier is left to the handler")
}

func make129() []byte {
	b := make([]byte, 129)
	for i := range b {
		b[i] = 'a'
	}
	return b
}

// TestFeishuIVBitFlip replays captured encrypted bodies with IV bits flipped:
// AES-CBC has no MAC, so the first 16 bytes of the plaintext change at the
// attacker's will. A signed body then fails its signature; an unsigned check
// is refused unless it is still a url_verification with the token, and then
// Verify returns only its members rebuilt, whose challenge is an identifier.
func TestFeishuIVBitFlip(t *testing.T) {
	s := platformtest.NewSigner("feishu", "encrypt-key")
	p := s.Preset(platform.Feishu).WithVerificationToken("xxxxxx")
	check := s.Encrypt([]byte(feishuCheck))

	event := s.Encrypt(fixture(t, "feishu_message_push1.json"))
	h := s.Sign(event, now)
	_, err := p.Verify(flipIV(t, event, `{"schema":"2.0",`, `{"schema":"1.0",`), h, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "the signature covers the body")

	dropped := flipIV(t, check, `{"challenge":"aj`, `{"x":"","challen`)
	_, err = p.Verify(dropped, nil, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "no challenge left")

	typed := flipIV(t, check, `{"challenge":"aj`, `{"type":"x","a":`)
	_, err = p.Verify(typed, nil, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "no longer JSON")

	rewritten := flipIV(t, check, `{"challenge":"aj`, `{"challenge":"ZZ`)
	got, err := p.Verify(rewritten, nil, now)
	require.NoError(t, err, "still a check with the token")
	assert.JSONEq(t, `{"challenge":"ZZls384kdjx98XX","token":"xxxxxx","type":"url_verification"}`, string(got),
		"only the members, rebuilt")
	answer, _ := p.Answer(got)
	assert.JSONEq(t, `{"challenge":"ZZls384kdjx98XX"}`, string(answer), "the attacker gets back an identifier")
}

// TestWithVerificationToken checks the token on its own and on presets
// that have none.
func TestWithVerificationToken(t *testing.T) {
	p := platform.Feishu.WithVerificationToken("tok")
	require.NoError(t, p.CheckSecret())
	_, err := p.Verify([]byte(`{"schema":"2.0","header":{"event_id":"e1","token":"tok"}}`), nil, now)
	assert.NoError(t, err, "the token alone authenticates plain deliveries")
	s := platformtest.NewSigner("feishu", "encrypt-key")
	enc := s.Encrypt(fixture(t, "feishu_message_push1.json"))
	_, err = p.Verify(enc, s.Sign(enc, now), now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "no Encrypt Key to decrypt with")

	both := platform.Feishu.WithVerificationToken("tok").WithSecret("encrypt-key")
	_, err = both.Verify(enc, s.Sign(enc, now), now)
	assert.NoError(t, err, "either order")
	_, err = both.Verify([]byte(`{"schema":"2.0","header":{"event_id":"e1","token":"encrypt-key"}}`), nil, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "plain bodies carry the token, not the Encrypt Key")

	for name, q := range map[string]platform.Preset{
		"empty":  platform.Feishu.WithSecret("k").WithVerificationToken(""),
		"slack":  platform.Slack.WithSecret("k").WithVerificationToken("tok"),
		"custom": platform.Preset{Name: "web"}.WithVerificationToken("tok"),
	} {
		assert.ErrorIs(t, q.CheckSecret(), platform.ErrUnauthenticated, name)
		_, err := q.Verify([]byte(`{}`), http.Header{}, now)
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, "%s: fails closed", name)
	}
}

// TestTokenInBody checks which deliveries a preset authenticates by a token
// in their body alone: Feishu's plain ones, whether the token came as the
// secret or with WithVerificationToken; not its encrypted ones, not a
// preset without a secret, not another platform.
func TestTokenInBody(t *testing.T) {
	s := platformtest.NewSigner("feishu", "the-encrypt-key-of-the-app")
	plain := fixture(t, "feishu_card_action.json")
	encrypted := s.Encrypt(plain)
	feishu := s.Preset(platform.Feishu).WithVerificationToken("xxxxxx")
	for _, tc := range []struct {
		name   string
		preset platform.Preset
		body   []byte
		want   bool
	}{
		{"feishu plain, Encrypt Key and token", feishu, plain, true},
		{"feishu plain, token alone", platform.Feishu.WithVerificationToken("xxxxxx"), plain, true},
		{"feishu plain, token as the secret", platform.Feishu.WithSecret("xxxxxx"), plain, true},
		{"feishu encrypted", feishu, encrypted, false},
		{"feishu without a secret", platform.Feishu, plain, false},
		{"slack", platform.Slack.WithSecret("the-signing-secret"), fixture(t, "slack_event_callback.json"), false},
		{"telegram", platform.Telegram.WithSecret("the-secret-token"), []byte(`{"update_id":1}`), false},
	} {
		assert.Equal(t, tc.want, tc.preset.TokenInBody(tc.body, s.Sign(tc.body, now)), tc.name)
	}
}
