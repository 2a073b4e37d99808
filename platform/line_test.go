package platform_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// TestLINEEvents keys the request body example of the Messaging API
// reference (testdata/line_events.json) and its redelivery: one key per
// webhookEventId, the same keys whatever isRedelivery and the order.
func TestLINEEvents(t *testing.T) {
	want := []string{"01FZ74A0TDDPYRVKNK77XKC3ZR", "01FZ74ASS536FW97EX38NKCZQK", "01FZ74B5Y0F4TNKA5SCAVKPEDM"}
	assert.Equal(t, want, eventIDs(t, platform.LINE, fixture(t, "line_events.json")))
	assert.ElementsMatch(t, want, eventIDs(t, platform.LINE, fixture(t, "line_events_redelivery.json")),
		"a redelivery gives the keys of the first delivery")

	body := fixture(t, "line_events.json")
	evs, err := platform.LINE.Events(body, nil)
	require.NoError(t, err)
	assert.Contains(t, string(evs[0].Raw), `"Hello, world"`, "Raw is the event's own JSON")
	assert.Equal(t, dedupe.Key{Channel: "line", MessageID: want[0]}, evs[0].Key(platform.LINE))
}

// TestLINEEventsEdges covers the bodies the preset must not guess at: an
// event without webhookEventId (as in the SDK tests written before LINE
// added it) fails the delivery rather than being dropped.
func TestLINEEventsEdges(t *testing.T) {
	for name, c := range map[string]struct {
		body string
		want error
	}{
		"no webhookEventId": {`{"events":[{"webhookEventId":"A"},{"type":"follow"}]}`, dedupe.ErrNoMessageID},
		"empty id":          {`{"events":[{"webhookEventId":""}]}`, dedupe.ErrNoMessageID},
		"id twice":          {`{"events":[{"webhookEventId":"A","webhookEventId":"B"}]}`, dedupe.ErrInvalidKey},
		"id not text":       {`{"events":[{"webhookEventId":"\udc00"}]}`, dedupe.ErrInvalidKey},
		"id an object":      {`{"events":[{"webhookEventId":{}}]}`, dedupe.ErrInvalidKey},
		"case differs":      {`{"events":[{"WebhookEventId":"A"}]}`, dedupe.ErrNoMessageID},
		"events twice":      {`{"events":[],"events":[{"webhookEventId":"A"}]}`, dedupe.ErrInvalidKey},
		"null event":        {`{"events":[null]}`, dedupe.ErrNoMessageID},
	} {
		assert.ErrorIs(t, eventsError(platform.LINE, []byte(c.body)), c.want, name)
	}
	// The old SDK test body (line/line-bot-sdk-nodejs, test/middleware.spec.ts)
	// has no webhookEventId.
	assert.ErrorIs(t, eventsError(platform.LINE, []byte(lineNodeBody)), dedupe.ErrNoMessageID)
}

// lineNodeBody is the body of line/line-bot-sdk-nodejs, test/middleware.spec.ts
// ({ events: [webhook] } as JSON.stringify writes it), which the SDK posts
// with X-Line-Signature qeDy61PbQK+aO97Bs8zjaFgYjQxFruGd13pfXPQoBRU= for the
// channel secret test_channel_secret.
const lineNodeBody = `{"events":[{"message":{"id":"test_event_message_id","text":"this is test message.","type":"text"},"replyToken":"test_reply_token","source":{"groupId":"test_group_id","type":"group"},"timestamp":0,"type":"message"}]}`

// TestLINEPublishedSignatures runs the signatures of LINE's official SDK
// tests: line/line-bot-sdk-nodejs, test/validate-signature.spec.ts (body
// {"hello":"world"}, secret test_secret) and test/middleware.spec.ts.
func TestLINEPublishedSignatures(t *testing.T) {
	for _, c := range []struct {
		secret, body, good, bad string
	}{
		{"test_secret", `{"hello":"world"}`,
			"t7Hn4ZDHqs6e+wdvI5TyQIvzie0DmMUmuXEBqyyE/tM=", "t7Hn4ZDHqs6e+wdvi5TyQivzie0DmMUmuXEBqyyE/tM="},
		{"test_channel_secret", lineNodeBody,
			"qeDy61PbQK+aO97Bs8zjaFgYjQxFruGd13pfXPQoBRU=", "qeDy61PbQK+aO97Bs8zjbFgYjQxFruGd13pfXPQoBRU="},
	} {
		p := platform.LINE.WithSecret(c.secret)
		_, err := p.Verify([]byte(c.body), http.Header{"X-Line-Signature": {c.good}}, now)
		require.NoError(t, err)
		_, err = p.Verify([]byte(c.body), http.Header{"X-Line-Signature": {c.bad}}, now)
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, "the SDK's failing signature")
	}
}

// TestLINEForgeries sends 1,000 forged deliveries of eleven kinds.
func TestLINEForgeries(t *testing.T) {
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	s := platformtest.NewSigner("line", secret)
	other := platformtest.NewSigner("line", "channel-secret-of-another-bot")
	p := s.Preset(platform.LINE)
	base := fixture(t, "line_events.json")
	body := func(i int) []byte { return numbered(base, "Hello, world", i) }
	sig := func(i int) string { return s.Sign(body(i), now).Get("X-Line-Signature") }
	header := func(v string) http.Header { return http.Header{"X-Line-Signature": {v}} }
	runForgeries(t, secret, []forgery{
		{"wrong secret", func(i int) ([]byte, http.Header) {
			return body(i), platformtest.NewSigner("line", strings.Repeat("x", i%40+1)).Sign(body(i), now)
		}, p},
		{"other bot's secret", func(i int) ([]byte, http.Header) { return body(i), other.Sign(body(i), now) }, p},
		{"tampered body", func(i int) ([]byte, http.Header) {
			return bytes.Replace(body(i), []byte(`"follow"`), []byte(`"unfollow"`), 1), header(sig(i))
		}, p},
		{"signature of another body", func(i int) ([]byte, http.Header) { return body(i), header(sig(i + 1)) }, p},
		{"missing header", func(i int) ([]byte, http.Header) { return body(i), http.Header{} }, p},
		{"malformed header", func(i int) ([]byte, http.Header) { return body(i), header("%%%" + sig(i)[3:]) }, p},
		{"truncated signature", func(i int) ([]byte, http.Header) {
			raw, _ := base64.StdEncoding.DecodeString(sig(i))
			return body(i), header(base64.StdEncoding.EncodeToString(raw[:i%31+1]))
		}, p},
		{"wrong scheme prefix", func(i int) ([]byte, http.Header) { return body(i), header("sha256=" + sig(i)) }, p},
		{"hex instead of base64", func(i int) ([]byte, http.Header) {
			return body(i), platformtest.NewSigner("meta", secret).Sign(body(i), now) // X-Hub-Signature-256, hex
		}, p},
		{"empty secret", func(i int) ([]byte, http.Header) {
			return body(i), platformtest.NewSigner("line", "").Sign(body(i), now)
		}, platform.LINE.WithSecret("")},
		{"signature in another header", func(i int) ([]byte, http.Header) {
			return body(i), http.Header{"X-Line-Signature-256": {sig(i)}}
		}, p},
	})
}

// FuzzLINEVerify checks that LINE's Verify accepts a delivery only when
// X-Line-Signature decodes to the HMAC-SHA256 of the body, whatever the body
// and header the fuzzer makes up.
func FuzzLINEVerify(f *testing.F) {
	const secret = "test_secret"
	f.Add([]byte(`{"hello":"world"}`), "t7Hn4ZDHqs6e+wdvI5TyQIvzie0DmMUmuXEBqyyE/tM=")
	f.Add([]byte(`{"hello":"world"}`), "t7Hn4ZDHqs6e+wdvI5TyQIvzie0DmMUmuXEBqyyE/tN=")
	f.Add(fixture(f, "line_events.json"), "")
	f.Fuzz(func(t *testing.T, body []byte, sig string) {
		_, err := platform.LINE.WithSecret(secret).Verify(body, http.Header{"X-Line-Signature": {sig}}, now)
		if err != nil {
			require.ErrorIs(t, err, platform.ErrUnauthenticated)
			return
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		got, derr := base64.StdEncoding.DecodeString(sig)
		require.NoError(t, derr)
		require.Equal(t, mac.Sum(nil), got, "accepted a signature that is not the body's")
	})
}
