package platform_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// TestMetaEvents keys the payloads of Meta's webhook references: a WhatsApp
// Cloud API delivery (a message, a reaction to it, two statuses of one
// outgoing message), a Messenger one (a message, a reaction to it, a
// postback, a read) and an Instagram one.
func TestMetaEvents(t *testing.T) {
	const (
		wamid   = "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA="
		reacted = "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUQ1OEQ1RDRDNEYzQjgwMkZCRgA="
		sent    = "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI0MzA0QjQ1RjU5ODQ1RTBCMEIA"
		mid     = "m_1457764197618:41d102a3e1ae206a38"
	)
	assert.Equal(t, []string{
		"message:" + wamid, "message:" + reacted, "status:" + sent + ":sent", "status:" + sent + ":delivered",
	}, eventIDs(t, platform.Meta, fixture(t, "meta_whatsapp.json")))
	assert.Equal(t, []string{
		"message:" + mid,
		"reaction:1254459154682919:1458692752600:react:" + mid,
		"postback:m_AG5Hz2Uq7tuwNEhXfYYKj8mJEM_QPpz5jdCK48PnKAjSdjfipqxqMvK8ma6AC8fplwlqLP_5cgXIbu7I3rBN0P",
		"event:read:1254459154682919:1458668856463",
	}, eventIDs(t, platform.Meta, fixture(t, "meta_messenger.json")))
	ig := eventIDs(t, platform.Meta, fixture(t, "meta_instagram.json"))
	require.Len(t, ig, 1)
	assert.True(t, strings.HasPrefix(ig[0], "message:aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlE"))
}

// TestMetaOptInUserRef keys a Messenger batch of [message, opt-in, message]
// whose opt-in comes from the checkbox plugin, identified by
// sender.user_ref and without sender.id, as Meta's messaging_optins
// reference shows it ("user_ref: The user_ref of the user that triggered the
// webhook event", https://developers.facebook.com/docs/messenger-platform/reference/webhook-events/messaging_optins):
// the two messages are keyed, and the opt-in is returned in its place with
// an Err of dedupe.ErrNoMessageID that does not quote the user_ref. Before,
// the batch was one error and no event.
func TestMetaOptInUserRef(t *testing.T) {
	body := fixture(t, "meta_optin_user_ref.json")
	evs, err := platform.Meta.Events(body, nil)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	assert.Equal(t, "message:m_1457764197618:41d102a3e1ae206a38", evs[0].ID)
	assert.Equal(t, "message:m_1457764197618:41d102a3e1ae206a39", evs[2].ID)
	assert.NoError(t, evs[0].Err)
	assert.NoError(t, evs[2].Err)
	assert.Empty(t, evs[1].ID)
	assert.ErrorIs(t, evs[1].Err, dedupe.ErrNoMessageID)
	assert.NotContains(t, evs[1].Err.Error(), "cbp_7b3f1d5e")
	assert.Contains(t, string(evs[1].Raw), `"optin"`)
	assert.Equal(t, dedupe.Key{Channel: "meta"}, evs[1].Key(platform.Meta))
}

// TestMetaEventsKinds covers the keys of events without an id of their own
// and the bodies that must not give a key: no two of them may collide.
func TestMetaEventsKinds(t *testing.T) {
	msg := func(ev string) string {
		return `{"object":"page","entry":[{"messaging":[{"sender":{"id":"7"},"recipient":{"id":"9"},"timestamp":1458668856463,` + ev + `}]}]}`
	}
	seen := map[string]string{}
	for _, c := range []struct{ ev, want string }{
		{`"message":{"mid":"m_1","text":"hi"}`, "message:m_1"},
		{`"message":{"mid":"m_1","is_echo":true}`, "message:m_1"},
		{`"postback":{"mid":"m_1","payload":"P"}`, "postback:m_1"},
		{`"postback":{"payload":"P"}`, "event:postback:7:1458668856463"},
		{`"reaction":{"action":"unreact","mid":"m_1"}`, "reaction:7:1458668856463:unreact:m_1"},
		{`"delivery":{"mids":["m_1"],"watermark":1458668856253}`, "event:delivery:7:1458668856463"},
		{`"optin":{"ref":"R"}`, "event:optin:7:1458668856463"},
		{`"message_edit":{"mid":"m_1","text":"hi!","num_edit":1}`, "event:message_edit:7:1458668856463"},
	} {
		evs, err := platform.Meta.Events([]byte(msg(c.ev)), nil)
		require.NoError(t, err, c.ev)
		require.Len(t, evs, 1)
		assert.Equal(t, c.want, evs[0].ID, c.ev)
		if prev, dup := seen[evs[0].ID]; dup && !strings.Contains(prev+c.ev, "is_echo") {
			t.Errorf("%s and %s give one key", prev, c.ev)
		}
		seen[evs[0].ID] = c.ev
	}
	for _, c := range []struct {
		ev   string
		want error
	}{
		{`"reaction":{"action":"re:act","mid":"m_1"}`, dedupe.ErrInvalidKey},
		{`"reaction":{"action":"react"}`, dedupe.ErrNoMessageID},
		{`"Read":{"watermark":1}`, dedupe.ErrInvalidKey},
		{`"note":"no object"`, dedupe.ErrNoMessageID},
		{`"message":{"mid":""}`, dedupe.ErrNoMessageID},
		{`"message":{"mid":"m_1","mid":"m_2"}`, dedupe.ErrInvalidKey},
	} {
		assert.ErrorIs(t, eventsError(platform.Meta, []byte(msg(c.ev))), c.want, c.ev)
	}
	for name, body := range map[string]string{
		"sender not digits":    `{"entry":[{"messaging":[{"sender":{"id":"7:1"},"timestamp":1,"read":{}}]}]}`,
		"timestamp not digits": `{"entry":[{"messaging":[{"sender":{"id":"7"},"timestamp":1.5,"read":{}}]}]}`,
		"status with a colon":  `{"entry":[{"changes":[{"value":{"statuses":[{"id":"w","status":"read:x"}]}}]}]}`,
		"status upper case":    `{"entry":[{"changes":[{"value":{"statuses":[{"id":"w","status":"READ"}]}}]}]}`,
	} {
		assert.ErrorIs(t, eventsError(platform.Meta, []byte(body)), dedupe.ErrInvalidKey, name)
	}
	for name, body := range map[string]string{
		"status without status": `{"entry":[{"changes":[{"value":{"statuses":[{"id":"w"}]}}]}]}`,
		"message without id":    `{"entry":[{"changes":[{"value":{"messages":[{"type":"text"}]}}]}]}`,
		"no sender":             `{"entry":[{"messaging":[{"timestamp":1,"read":{}}]}]}`,
	} {
		assert.ErrorIs(t, eventsError(platform.Meta, []byte(body)), dedupe.ErrNoMessageID, name)
	}
	// A change without messages or statuses has no event.
	evs, err := platform.Meta.Events([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"account_update","value":{"event":"VERIFIED_ACCOUNT"}}]}]}`), nil)
	require.NoError(t, err)
	assert.Empty(t, evs)
}

// TestMetaPublishedSignature runs the worked example of the
// X-Hub-Signature-256 scheme that GitHub publishes ("Validating webhook
// deliveries": secret "It's a Secret to Everybody", payload "Hello,
// World!"): Meta's header is the same, "sha256=" and the hex HMAC-SHA256 of
// the body. Meta publishes no worked example of its own.
func TestMetaPublishedSignature(t *testing.T) {
	p := platform.Meta.WithSecret("It's a Secret to Everybody")
	h := http.Header{"X-Hub-Signature-256": {"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}}
	_, err := p.Verify([]byte("Hello, World!"), h, now)
	require.NoError(t, err)
	_, err = p.Verify([]byte("Hello, World?"), h, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated)
}

// TestMetaForgeries sends 1,000 forged deliveries of eleven kinds.
func TestMetaForgeries(t *testing.T) {
	const secret = "7f4b9d1c2e3a5b6c8d9e0f1a2b3c4d5e"
	s := platformtest.NewSigner("meta", secret)
	other := platformtest.NewSigner("meta", "app-secret-of-another-app")
	p := s.Preset(platform.Meta)
	base := fixture(t, "meta_whatsapp.json")
	body := func(i int) []byte { return numbered(base, "another color", i) }
	sig := func(i int) string { return s.Sign(body(i), now).Get("X-Hub-Signature-256") }
	header := func(v string) http.Header { return http.Header{"X-Hub-Signature-256": {v}} }
	runForgeries(t, secret, []forgery{
		{"wrong secret", func(i int) ([]byte, http.Header) {
			return body(i), platformtest.NewSigner("meta", strings.Repeat("y", i%40+1)).Sign(body(i), now)
		}, p},
		{"other app's secret", func(i int) ([]byte, http.Header) { return body(i), other.Sign(body(i), now) }, p},
		{"tampered body", func(i int) ([]byte, http.Header) {
			return bytes.Replace(body(i), []byte(`"delivered"`), []byte(`"read"`), 1), header(sig(i))
		}, p},
		{"signature of another body", func(i int) ([]byte, http.Header) { return body(i), header(sig(i + 1)) }, p},
		{"missing header", func(i int) ([]byte, http.Header) { return body(i), http.Header{} }, p},
		{"malformed header", func(i int) ([]byte, http.Header) { return body(i), header("sha256=zz" + sig(i)[9:]) }, p},
		{"truncated signature", func(i int) ([]byte, http.Header) { return body(i), header(sig(i)[:7+i%64]) }, p},
		{"wrong scheme prefix", func(i int) ([]byte, http.Header) {
			return body(i), header([]string{"sha1=", "SHA256=", "v0=", ""}[i%4] + strings.TrimPrefix(sig(i), "sha256="))
		}, p},
		{"SHA-1 header only", func(i int) ([]byte, http.Header) {
			return body(i), http.Header{"X-Hub-Signature": {"sha1=" + strings.Repeat("ab", 20)}}
		}, p},
		{"empty secret", func(i int) ([]byte, http.Header) {
			return body(i), platformtest.NewSigner("meta", "").Sign(body(i), now)
		}, platform.Meta.WithSecret("")},
		{"base64 instead of hex", func(i int) ([]byte, http.Header) {
			return body(i), header("sha256=" + platformtest.NewSigner("line", secret).Sign(body(i), now).Get("X-Line-Signature"))
		}, p},
	})
}

// TestMetaAnswerSubscription runs the verification request of the Graph API
// Webhooks guide (hub.mode=subscribe&hub.challenge=1158201444&
// hub.verify_token=meatyhamhock) and the requests it must not answer.
func TestMetaAnswerSubscription(t *testing.T) {
	p := platform.Meta.WithSecret("app-secret").WithVerifyToken("meatyhamhock")
	require.NoError(t, p.CheckSecret())
	q, err := url.ParseQuery("hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock")
	require.NoError(t, err)
	got, ok := p.AnswerSubscription(q)
	require.True(t, ok)
	assert.Equal(t, "1158201444", string(got))

	for name, raw := range map[string]string{
		"wrong token":        "hub.mode=subscribe&hub.challenge=1&hub.verify_token=meatyhamhocK",
		"token prefix":       "hub.mode=subscribe&hub.challenge=1&hub.verify_token=meaty",
		"no token":           "hub.mode=subscribe&hub.challenge=1",
		"empty token":        "hub.mode=subscribe&hub.challenge=1&hub.verify_token=",
		"token twice":        "hub.mode=subscribe&hub.challenge=1&hub.verify_token=x&hub.verify_token=meatyhamhock",
		"other mode":         "hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=meatyhamhock",
		"no mode":            "hub.challenge=1&hub.verify_token=meatyhamhock",
		"no challenge":       "hub.mode=subscribe&hub.verify_token=meatyhamhock",
		"challenge markup":   "hub.mode=subscribe&hub.challenge=%3Cscript%3E&hub.verify_token=meatyhamhock",
		"challenge too long": "hub.mode=subscribe&hub.challenge=" + strings.Repeat("1", 129) + "&hub.verify_token=meatyhamhock",
		"PHP underscores":    "hub_mode=subscribe&hub_challenge=1&hub_verify_token=meatyhamhock",
	} {
		q, err := url.ParseQuery(raw)
		require.NoError(t, err)
		_, ok := p.AnswerSubscription(q)
		assert.False(t, ok, name)
	}
	_, ok = platform.Meta.WithSecret("app-secret").AnswerSubscription(q)
	assert.False(t, ok, "no verify token, no answer")

	assert.ErrorIs(t, platform.Meta.WithVerifyToken("").CheckSecret(), platform.ErrUnauthenticated)
	assert.ErrorIs(t, platform.LINE.WithSecret("s").WithVerifyToken("t").CheckSecret(), platform.ErrUnauthenticated)
	_, ok = platform.LINE.WithVerifyToken("meatyhamhock").AnswerSubscription(q)
	assert.False(t, ok, "only Meta checks a subscription")
}

// FuzzMetaVerify checks that Meta's Verify accepts a delivery only when
// X-Hub-Signature-256 is "sha256=" and the hex HMAC-SHA256 of the body.
func FuzzMetaVerify(f *testing.F) {
	const secret = "It's a Secret to Everybody"
	f.Add([]byte("Hello, World!"), "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	f.Add([]byte("Hello, World!"), "sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17")
	f.Add(fixture(f, "meta_whatsapp.json"), "sha1=00")
	f.Fuzz(func(t *testing.T, body []byte, sig string) {
		_, err := platform.Meta.WithSecret(secret).Verify(body, http.Header{"X-Hub-Signature-256": {sig}}, now)
		if err != nil {
			require.ErrorIs(t, err, platform.ErrUnauthenticated)
			return
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		require.True(t, strings.HasPrefix(sig, "sha256="))
		got, derr := hex.DecodeString(sig[len("sha256="):])
		require.NoError(t, derr)
		require.Equal(t, mac.Sum(nil), got, "accepted a signature that is not the body's")
	})
}
