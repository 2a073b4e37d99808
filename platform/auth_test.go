package platform_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// now is the clock of the verification tests.
var now = time.Unix(1764448112, 0)

// authCases pairs each preset with a fixture of a real delivery.
var authCases = []struct {
	preset  platform.Preset
	fixture string
}{
	{platform.Telegram, "telegram_message.json"},
	{platform.Slack, "slack_event_callback.json"},
	{platform.Feishu, "feishu_message_push1.json"},
	{platform.Discord, "discord_application_command.json"},
	{platform.OneBot, "onebot_group_message.json"},
	{platform.QQ, "qq_group_at_message.json"},
}

// TestVerifyAuthenticAndForged checks, for every preset, that a delivery
// signed with the secret passes and comes back unchanged, and that forged
// ones are refused: no signature, another secret, another body.
func TestVerifyAuthenticAndForged(t *testing.T) {
	for _, c := range authCases {
		t.Run(c.preset.Name, func(t *testing.T) {
			s := platformtest.NewSigner(c.preset.Name, "s3cret-"+c.preset.Name)
			p := s.Preset(c.preset)
			require.NoError(t, p.CheckSecret())
			plain := fixture(t, c.fixture)
			body := plain
			if c.preset.Name == "feishu" {
				body = s.Encrypt(plain)
			}

			got, err := p.Verify(body, s.Sign(body, now), now)
			require.NoError(t, err)
			assert.Equal(t, plain, got)

			other := platformtest.NewSigner(c.preset.Name, "another-secret")
			tampered := bytes.Replace(plain, []byte("lease"), []byte("lasso"), 1)
			if c.preset.Name == "feishu" {
				tampered = s.Encrypt(tampered)
			}
			require.NotEqual(t, body, tampered)
			for name, h := range map[string]http.Header{
				"no headers":     nil,
				"empty headers":  {},
				"another secret": other.Sign(body, now),
			} {
				_, err := p.Verify(body, h, now)
				assert.ErrorIs(t, err, platform.ErrUnauthenticated, name)
			}
			if c.preset.Name != "telegram" { // Telegram's token does not cover the body
				_, err := p.Verify(tampered, s.Sign(body, now), now)
				assert.ErrorIs(t, err, platform.ErrUnauthenticated, "another body")
			}
			_, err = p.Verify(body, s.Sign(body, now), now)
			require.NotContains(t, fmt.Sprint(err), s.Secret())
		})
	}
}

// TestVerifyReplayWindow checks that a signed timestamp too far from now is
// refused: 5 minutes for Slack, the TTL for the others that sign one.
func TestVerifyReplayWindow(t *testing.T) {
	for _, c := range []struct {
		preset platform.Preset
		window time.Duration
	}{
		{platform.Slack, 5 * time.Minute},
		{platform.Discord, platform.Discord.TTL},
		{platform.QQ, platform.QQ.TTL},
	} {
		t.Run(c.preset.Name, func(t *testing.T) {
			s := platformtest.NewSigner(c.preset.Name, "k")
			p := s.Preset(c.preset)
			body := []byte(`{"op":0,"type":2,"id":"1","event_id":"Ev1"}`)
			for _, d := range []time.Duration{c.window, -c.window} {
				_, err := p.Verify(body, s.Sign(body, now.Add(d)), now)
				assert.NoError(t, err, "at %v", d)
			}
			for _, d := range []time.Duration{c.window + time.Second, -c.window - time.Second} {
				_, err := p.Verify(body, s.Sign(body, now.Add(d)), now)
				assert.ErrorIs(t, err, platform.ErrUnauthenticated, "at %v", d)
			}
			h := s.Sign(body, now)
			for _, bad := range []string{"", "-5", "12a", "17644481120000"} {
				h.Set(map[bool]string{true: "X-Slack-Request-Timestamp", false: "X-Signature-Timestamp"}[c.preset.Name == "slack"], bad)
				_, err := p.Verify(body, h, now)
				assert.ErrorIs(t, err, platform.ErrUnauthenticated, "timestamp %q", bad)
			}
		})
	}
}

// TestVerifySlackPublishedExample runs the worked example of Slack's
// "Verifying requests from Slack".
func TestVerifySlackPublishedExample(t *testing.T) {
	body := []byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", "1531420618")
	h.Set("X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503")
	p := platform.Slack.WithSecret("8f742231b10e8888abcd99yyyzzz85a5")
	at := time.Unix(1531420618, 0)
	_, err := p.Verify(body, h, at)
	require.NoError(t, err)
	_, err = p.Verify(body, h, at.Add(5*time.Minute+time.Second))
	require.ErrorIs(t, err, platform.ErrUnauthenticated, "stale timestamp")
	h.Set("X-Slack-Signature", "v0=A2114D57B48EAC39B9AD189DD8316235A7B4A8D21A10BD27519666489C69B503")
	_, err = p.Verify(body, h, at)
	require.NoError(t, err, "hex of either case")
}

// TestVerifyQQPublishedExamples runs the examples of the QQ bot
// documentation: a signed callback (sign.md) and the answer to a callback URL
// validation (event-emit.md).
func TestVerifyQQPublishedExamples(t *testing.T) {
	// sign.md derives from the secret naOC0ocQE3shWLAfffVLB1rhYPG7 the seed
	// naOC0ocQE3shWLAfffVLB1rhYPG7naOC and prints the public key: a signature
	// by that key pair must pass.
	pub := []byte{215, 195, 98, 254, 120, 174, 248, 31, 242, 50, 135, 180, 147, 98, 139, 93,
		176, 42, 60, 79, 227, 11, 33, 94, 77, 25, 96, 155, 93, 118, 103, 58}
	priv := ed25519.PrivateKey(append([]byte("naOC0ocQE3shWLAfffVLB1rhYPG7naOC"), pub...))
	body := []byte(`{ "op": 0,"d": {}, "t": "GATEWAY_EVENT_NAME"}`)
	h := http.Header{}
	h.Set("X-Signature-Timestamp", "1725442341")
	h.Set("X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(priv, []byte("1725442341"+string(body)))))
	_, err := platform.QQ.WithSecret("naOC0ocQE3shWLAfffVLB1rhYPG7").Verify(body, h, time.Unix(1725442341, 0))
	require.NoError(t, err)

	p := platform.QQ.WithSecret("DG5g3B4j9X2KOErG")
	validation := []byte(`{"d":{"plain_token":"Arq0D5A61EgUu4OxUvOp","event_ts":"1725442341"},"op":13}`)
	h = http.Header{"User-Agent": {"QQBot-Callback"}, "X-Bot-Appid": {"11111111"}}
	got, err := p.Verify(validation, h, now)
	require.NoError(t, err, "the validation comes unsigned")
	answer, ok := p.Answer(got)
	require.True(t, ok)
	assert.JSONEq(t, `{"plain_token":"Arq0D5A61EgUu4OxUvOp","signature":"87befc99c42c651b3aac0278e71ada338433ae26fcb24307bdc5ad38c1adc2d01bcfcadc0842edac85e85205028a1132afe09280305f13aa6909ffc2d652c706"}`, string(answer))

	_, ok = platform.QQ.Answer(validation)
	assert.False(t, ok, "no secret, no answer")
	_, ok = p.Answer(fixture(t, "qq_group_at_message.json"))
	assert.False(t, ok, "not a validation")
}

// TestQQAnswerIsNoSigningOracle checks that the unsigned validation cannot be
// used to obtain the signature of a forged callback: a plain_token that could
// continue into a JSON body is not answered, and a signed body that is not a
// JSON object is refused.
func TestQQAnswerIsNoSigningOracle(t *testing.T) {
	s := platformtest.NewSigner("qq", "bot-secret")
	p := s.Preset(platform.QQ)
	forged := `{"op":0,"id":"E9","d":{}}`
	for _, token := range []string{forged, `{`, `a"b`, `x[1]`, `a b`, `back\slash`, "é", strings.Repeat("a", 257)} {
		req, _ := json.Marshal(map[string]any{"op": 13, "d": map[string]string{"plain_token": token, "event_ts": "1764448112"}})
		_, ok := p.Answer(req)
		assert.False(t, ok, "plain_token %q", token)
	}
	for _, ts := range []string{"", "-1", "1e9", "17644481{"} {
		req, _ := json.Marshal(map[string]any{"op": 13, "d": map[string]string{"plain_token": "abc", "event_ts": ts}})
		_, ok := p.Answer(req)
		assert.False(t, ok, "event_ts %q", ts)
	}
	// What an answer does sign can never pass as a callback.
	req := []byte(`{"op":13,"d":{"plain_token":"null","event_ts":"1764448112"}}`)
	answer, ok := p.Answer(req)
	require.True(t, ok)
	var a struct{ Signature string }
	require.NoError(t, json.Unmarshal(answer, &a))
	h := http.Header{"X-Signature-Timestamp": {"1764448112"}, "X-Signature-Ed25519": {a.Signature}}
	_, err := p.Verify([]byte("null"), h, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated)
	// An unsigned body that is not a validation is refused.
	_, err = p.Verify([]byte(forged), nil, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated)
}

// TestVerifyFeishu covers the two modes of Feishu: encrypted with the
// Encrypt Key, and plain with the Verification Token.
func TestVerifyFeishu(t *testing.T) {
	s := platformtest.NewSigner("feishu", "encrypt-key-1")
	p := s.Preset(platform.Feishu)
	plain := fixture(t, "feishu_message_push1.json")
	enc := s.Encrypt(plain)

	got, err := p.Verify(enc, s.Sign(enc, now), now)
	require.NoError(t, err)
	assert.Equal(t, plain, got, "the plaintext")
	k, err := p.Extract(got, nil)
	require.NoError(t, err)
	assert.Equal(t, "om_5ce6d572455d361153b7cb51da133945", k.MessageID)

	_, err = p.Verify(enc, nil, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "an event must be signed")
	challenge := s.Encrypt([]byte(`{"challenge":"c1","token":"t","type":"url_verification"}`))
	_, err = p.Verify(challenge, nil, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "an unsigned URL check needs the Verification Token")
	got, err = p.WithVerificationToken("t").Verify(challenge, nil, now)
	require.NoError(t, err, "the URL check is not signed; its token is checked")
	_, err = p.Extract(got, nil)
	assert.ErrorIs(t, err, platform.ErrNotAMessage)

	other := platformtest.NewSigner("feishu", "encrypt-key-2")
	for name, body := range map[string][]byte{
		"another key":    other.Encrypt(plain),
		"not base64":     []byte(`{"encrypt":"%%%"}`),
		"short":          []byte(`{"encrypt":"AAAA"}`),
		"not JSON":       s.Encrypt([]byte("hello world")),
		"a JSON string":  s.Encrypt([]byte(`"x"`)),
		"bad padding":    badPadding(t, enc),
		"plain no token": []byte(`{"schema":"2.0","header":{"event_id":"e1"}}`),
	} {
		_, err := p.Verify(body, s.Sign(body, now), now)
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, name)
	}

	for name, body := range map[string]string{
		"2.0":              `{"schema":"2.0","header":{"event_id":"e1","token":"encrypt-key-1"}}`,
		"1.0":              `{"uuid":"u1","token":"encrypt-key-1","event":{}}`,
		"url_verification": `{"challenge":"c","token":"encrypt-key-1","type":"url_verification"}`,
	} {
		_, err := p.Verify([]byte(body), nil, now)
		assert.NoError(t, err, name)
		_, err = p.Verify([]byte(strings.ReplaceAll(body, "key-1", "key-2")), nil, now)
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, name)
	}
	_, err = p.Verify([]byte(`{"schema":"2.0","token":"encrypt-key-1","header":{}}`), nil, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "2.0 reads header.token only")
}

// badPadding returns enc with the last byte of its padding changed.
func badPadding(t *testing.T, enc []byte) []byte {
	var e struct{ Encrypt string }
	require.NoError(t, json.Unmarshal(enc, &e))
	raw, err := base64.StdEncoding.DecodeString(e.Encrypt)
	require.NoError(t, err)
	// Flipping a bit of the second-to-last ciphertext block flips the same
	// bit of the last plaintext block, where the padding is.
	raw[len(raw)-17] ^= 0x40
	out, _ := json.Marshal(map[string]string{"encrypt": base64.StdEncoding.EncodeToString(raw)})
	return out
}

// TestCheckSecret checks how CheckSecret reports each configuration.
func TestCheckSecret(t *testing.T) {
	assert.ErrorIs(t, platform.Telegram.CheckSecret(), platform.ErrNoSecret)
	for name, p := range map[string]platform.Preset{
		"empty":               platform.Slack.WithSecret(""),
		"telegram characters": platform.Telegram.WithSecret("has space"),
		"telegram length":     platform.Telegram.WithSecret(strings.Repeat("a", 257)),
		"discord not hex":     platform.Discord.WithSecret("zz"),
		"discord short":       platform.Discord.WithSecret("abcd"),
		"custom preset":       platform.Preset{Name: "web"}.WithSecret("x"),
	} {
		err := p.CheckSecret()
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, name)
		assert.NotErrorIs(t, err, platform.ErrNoSecret, name)
		_, verr := p.Verify([]byte(`{}`), http.Header{}, now)
		assert.ErrorIs(t, verr, platform.ErrUnauthenticated, "%s: fails closed", name)
	}
	pub, _, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	assert.NoError(t, platform.Discord.WithSecret(hex.EncodeToString(pub)).CheckSecret())

	body := []byte(`{"update_id":1}`)
	got, err := platform.Telegram.Verify(body, nil, now)
	require.NoError(t, err, "no secret: not authenticated")
	assert.Equal(t, body, got)
}

// TestVerifyOneBotWebSocketFrame documents that a frame, without headers,
// does not pass Verify: OneBot authenticates the connection instead.
func TestVerifyOneBotWebSocketFrame(t *testing.T) {
	p := platform.OneBot.WithSecret("s")
	frame := fixture(t, "onebot_group_message.json")
	_, err := p.Verify(frame, nil, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated)
	k, err := p.Extract(frame, nil)
	require.NoError(t, err)
	assert.Equal(t, "3170000123:-2117483012", k.MessageID)
}

// FuzzVerifyForged checks that no preset with a secret accepts a delivery the
// fuzzer makes up, whatever its body and signature headers, except QQ's
// unsigned callback URL validation, which carries nothing to process.
func FuzzVerifyForged(f *testing.F) {
	for _, c := range authCases {
		f.Add(fixture(f, c.fixture), "1764448112", "00", "v0=00")
	}
	f.Add([]byte(`{"encrypt":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`), "1764448112", "n", "sha1=00")
	f.Add([]byte(`{"op":13,"d":{"plain_token":"a","event_ts":"1"}}`), "", "", "")
	f.Fuzz(func(t *testing.T, body []byte, ts, sig, sig2 string) {
		var presets []platform.Preset
		for _, c := range authCases {
			presets = append(presets, platformtest.NewSigner(c.preset.Name, "fuzz-secret").Preset(c.preset))
		}
		presets = append(presets, platform.Feishu.WithSecret("fuzz-secret").WithVerificationToken("fuzz-token"),
			platform.OneBot.WithBotSecrets(map[string]string{"1764448112": "fuzz-secret"}))
		for _, p := range presets {
			h := http.Header{"X-Self-Id": {ts}}
			for _, name := range []string{"X-Slack-Request-Timestamp", "X-Signature-Timestamp", "X-Lark-Request-Timestamp"} {
				h.Set(name, ts)
			}
			for _, name := range []string{"X-Signature-Ed25519", "X-Lark-Signature", "X-Lark-Request-Nonce", "X-Telegram-Bot-Api-Secret-Token"} {
				h.Set(name, sig)
			}
			h.Set("X-Slack-Signature", sig2)
			h.Set("X-Signature", sig2)
			got, err := p.Verify(body, h, now)
			if err == nil && p.Name == "qq" {
				if _, kerr := p.Extract(got, h); errors.Is(kerr, platform.ErrNotAMessage) {
					continue // the unsigned validation
				}
			}
			require.Error(t, err, "%s accepted a forged delivery %q with %v", p.Name, body, h)
			require.ErrorIs(t, err, platform.ErrUnauthenticated, "%s", p.Name)
		}
	})
}
