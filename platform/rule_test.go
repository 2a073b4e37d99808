package platform_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// hookRule is a Rule that signs the body alone, keyed by a header it does
// not sign (UnsignedID), as GitHub does.
func hookRule() platform.Rule {
	return platform.Rule{
		Name:       "hook",
		ID:         "header:X-Delivery",
		UnsignedID: true,
		Signature:  platform.SignatureRule{Header: "X-Signature", Encoding: "hex", Prefix: "sha256="},
	}
}

// TestNewPresetInvalid checks that NewPreset refuses each rule it cannot
// use, with ErrInvalidRule and an error that names the field.
func TestNewPresetInvalid(t *testing.T) {
	for _, c := range []struct {
		field string
		edit  func(r *platform.Rule)
	}{
		{"name", func(r *platform.Rule) { r.Name = "" }},
		{"name", func(r *platform.Rule) { r.Name = "a:b" }},
		{"id", func(r *platform.Rule) { r.ID = "" }},
		{"id", func(r *platform.Rule) { r.ID = "id" }},
		{"id", func(r *platform.Rule) { r.ID = "header:" }},
		{"id", func(r *platform.Rule) { r.ID = "header:X Delivery" }},
		{"id", func(r *platform.Rule) { r.ID = "/data/~2id" }},
		{"id", func(r *platform.Rule) { r.ID = "/id~" }},
		{"id", func(r *platform.Rule) { r.ID = "/\xff" }},
		{"id", func(r *platform.Rule) { r.ID = strings.Repeat("/a", 33) }},
		{"signature.header", func(r *platform.Rule) { r.Signature.Header = "" }},
		{"signature.header", func(r *platform.Rule) { r.Signature.Header = "X-Sig:" }},
		{"signature.algorithm", func(r *platform.Rule) { r.Signature.Algorithm = "hmac-sha1" }},
		{"signature.encoding", func(r *platform.Rule) { r.Signature.Encoding = "" }},
		{"signature.encoding", func(r *platform.Rule) { r.Signature.Encoding = "base32" }},
		{"signature.separator", func(r *platform.Rule) { r.Signature.Separator = ";" }},
		{"signature.prefix", func(r *platform.Rule) { r.Signature.Separator, r.Signature.Prefix = ",", "v1," }},
		{"signature.prefix", func(r *platform.Rule) { r.Signature.Prefix = "sha256 =" }},
		{"signature.secret_encoding", func(r *platform.Rule) { r.Signature.SecretEncoding = "pem" }},
		{"signature.secret_encoding", func(r *platform.Rule) { r.Signature.Algorithm = "ed25519" }},
		{"signature.signed", func(r *platform.Rule) { r.Signature.Signed = "{timestamp}" }},
		{"signature.signed", func(r *platform.Rule) { r.Signature.Signed = "{body}{body}" }},
		{"signature.signed", func(r *platform.Rule) { r.Signature.Signed = "{Body}" }},
		{"signature.signed", func(r *platform.Rule) { r.Signature.Signed = "{body" }},
		{"signature.signed", func(r *platform.Rule) { r.Signature.Signed = "}{body}" }},
		{"signature.signed", func(r *platform.Rule) { r.Signature.Signed = "{timestamp}.{body}" }},
		{"signature.signed", func(r *platform.Rule) { r.ID, r.Signature.Signed = "/id", "{id}.{body}" }},
		{"signature.signed", func(r *platform.Rule) { r.Timestamp = "header:X-Time" }},
		{"signature.signed", func(r *platform.Rule) { r.UnsignedID = false }},
		{"signature.signed", func(r *platform.Rule) { r.UnsignedID, r.Signature.Signed = false, "{timestamp}.{body}" }},
		{"unsigned_id", func(r *platform.Rule) { r.ID = "/id" }},
		{"unsigned_id", func(r *platform.Rule) { r.Signature.Signed = "{id}.{body}" }},
		{"timestamp", func(r *platform.Rule) { r.Timestamp = "X-Time" }},
		{"timestamp", func(r *platform.Rule) { r.Timestamp = "header:X Time" }},
		{"timestamp", func(r *platform.Rule) { r.Timestamp = "signature:t=" }},
		{"timestamp", func(r *platform.Rule) { r.Timestamp, r.Signature.Separator = "signature:", "," }},
		{"timestamp", func(r *platform.Rule) { r.Timestamp, r.Signature.Separator = "signature:sha", "," }},
		{"ttl", func(r *platform.Rule) { r.TTL = -time.Second }},
		{"ack_budget", func(r *platform.Rule) { r.AckBudget = -time.Second }},
		{"tolerance", func(r *platform.Rule) { r.Tolerance = time.Minute }},
		{"tolerance", func(r *platform.Rule) {
			r.Timestamp, r.Signature.Signed, r.TTL, r.Tolerance = "header:X-Time", "{timestamp}.{body}", time.Minute, time.Hour
		}},
		{"tolerance", func(r *platform.Rule) {
			r.Timestamp, r.Signature.Signed, r.Tolerance = "header:X-Time", "{timestamp}.{body}", -time.Second
		}},
	} {
		r := hookRule()
		c.edit(&r)
		_, err := platform.NewPreset(r)
		if assert.ErrorIs(t, err, platform.ErrInvalidRule, "%+v", r) {
			assert.Contains(t, err.Error(), c.field+" ", "%+v", r)
		}
	}
	_, err := platform.NewPreset(hookRule())
	require.NoError(t, err)
}

// TestRuleJSON decodes the rules of GitHub and Stripe as a configuration
// file writes them, and refuses what a configuration file gets wrong.
func TestRuleJSON(t *testing.T) {
	for name, c := range map[string]struct {
		text string
		want platform.Rule
	}{
		"github": {`{"name": "github", "id": "header:X-GitHub-Delivery", "unsigned_id": true, "ttl": "96h", "ack_budget": "5s",
			"signature": {"header": "X-Hub-Signature-256", "encoding": "hex", "prefix": "sha256="}}`, platform.GitHubRule},
		"stripe": {`{"name": "stripe", "id": "/id", "timestamp": "signature:t=", "tolerance": "300s", "ttl": "96h", "ack_budget": "2s",
			"signature": {"header": "Stripe-Signature", "signed": "{timestamp}.{body}", "encoding": "hex", "prefix": "v1=", "separator": ","}}`,
			platform.StripeRule},
	} {
		var r platform.Rule
		require.NoError(t, json.Unmarshal([]byte(c.text), &r), name)
		assert.Equal(t, c.want, r, name)
		out, err := json.Marshal(r)
		require.NoError(t, err)
		var again platform.Rule
		require.NoError(t, json.Unmarshal(out, &again), "%s", out)
		assert.Equal(t, r, again, "%s round-trips", name)
	}
	for _, bad := range []string{
		`{"name":"x","id":"/id","ttl":86400}`,
		`{"name":"x","id":"/id","ttl":"1 day"}`,
		`{"name":"x","id":"/id","tolerence":"5m"}`,
		`{"name":"x","id":"/id","signature":{"header":"X","encodng":"hex"}}`,
		`[]`,
	} {
		var r platform.Rule
		assert.ErrorIs(t, json.Unmarshal([]byte(bad), &r), platform.ErrInvalidRule, bad)
	}
}

// TestRulePresetsAreRules checks that the presets declared as rules are
// what NewPreset makes of their rules.
func TestRulePresetsAreRules(t *testing.T) {
	for _, c := range []struct {
		p platform.Preset
		r platform.Rule
	}{{platform.GitHub, platform.GitHubRule}, {platform.Stripe, platform.StripeRule}, {platform.StandardWebhooks, platform.StandardWebhooksRule}} {
		p, err := platform.NewPreset(c.r)
		require.NoError(t, err)
		assert.Equal(t, c.p.Name, p.Name)
		assert.Equal(t, c.p.TTL, p.TTL)
		assert.Equal(t, c.p.AckBudget, p.AckBudget)
	}
	_, err := platform.NewPreset(platform.StandardWebhooksV1aRule)
	require.NoError(t, err)
}

// TestRuleOtherSchemes writes Slack's and Discord's schemes as Rules and
// checks them against platformtest's Slack and Discord signers: the grammar
// holds HMAC over a template with a prefix and Ed25519 over a template, hex.
func TestRuleOtherSchemes(t *testing.T) {
	slack, err := platform.NewPreset(platform.Rule{
		Name: "slackrule", ID: "/event_id", Timestamp: "header:X-Slack-Request-Timestamp", Tolerance: 5 * time.Minute, TTL: time.Hour,
		Signature: platform.SignatureRule{Header: "X-Slack-Signature", Signed: "v0:{timestamp}:{body}", Encoding: "hex", Prefix: "v0="},
	})
	require.NoError(t, err)
	discord, err := platform.NewPreset(platform.Rule{
		Name: "discordrule", ID: "/id", Timestamp: "header:X-Signature-Timestamp", TTL: time.Hour,
		Signature: platform.SignatureRule{Header: "X-Signature-Ed25519", Algorithm: "ed25519", Signed: "{timestamp}{body}",
			Encoding: "hex", SecretEncoding: "hex"},
	})
	require.NoError(t, err)
	for _, c := range []struct {
		p       platform.Preset
		signer  string
		fixture string
		id      string
	}{
		{slack, "slack", "slack_event_callback.json", "Ev08MFMKH6"},
		{discord, "discord", "discord_application_command.json", "1187654321098765432"},
	} {
		s := platformtest.NewSigner(c.signer, "the-secret-of-the-rule")
		p := c.p.WithSecret(s.Secret())
		require.NoError(t, p.CheckSecret())
		body := fixture(t, c.fixture)
		got, err := p.Verify(body, s.Sign(body, now), now)
		require.NoError(t, err, c.signer)
		k, err := p.Extract(got, nil)
		require.NoError(t, err)
		assert.Equal(t, c.id, k.MessageID)
		_, err = p.Verify(body, s.Sign(body, now.Add(-2*time.Hour)), now)
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, "%s: stale", c.signer)
		_, err = p.Verify(append(body, ' '), s.Sign(body, now), now)
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, "%s: tampered", c.signer)
		_, err = p.Verify(body, platformtest.NewSigner(c.signer, "other").Sign(body, now), now)
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, "%s: other secret", c.signer)
	}
	assert.ErrorIs(t, discord.WithSecret("abcd").CheckSecret(), platform.ErrUnauthenticated, "not a 32-byte key")
	assert.ErrorIs(t, discord.WithSecret("zz").CheckSecret(), platform.ErrUnauthenticated, "not hex")
}

// TestRuleSignatures covers a rule's handling of its signature header:
// rotation, skipped entries, a cap on the signatures, a header id, the
// secret's prefix and encoding.
func TestRuleSignatures(t *testing.T) {
	r := hookRule()
	r.Signature.Separator, r.Signature.SecretEncoding, r.Signature.SecretPrefix = " ", "base64", "key_"
	base, err := platform.NewPreset(r)
	require.NoError(t, err)
	key := []byte("0123456789abcdef0123")
	p := base.WithSecret("key_" + base64.StdEncoding.EncodeToString(key))
	require.NoError(t, p.CheckSecret())
	assert.NoError(t, base.WithSecret(base64.StdEncoding.EncodeToString(key)).CheckSecret(), "the prefix is optional")
	assert.ErrorIs(t, base.WithSecret("key_%%%").CheckSecret(), platform.ErrUnauthenticated)
	assert.ErrorIs(t, base.WithSecret("key_").CheckSecret(), platform.ErrUnauthenticated)

	body := []byte(`{"action":"opened"}`)
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	good := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	wrong := "sha256=" + strings.Repeat("0", 64)
	hdr := func(sig string) http.Header { return http.Header{"X-Signature": {sig}, "X-Delivery": {"d-1"}} }
	for sig, ok := range map[string]bool{
		good:                                    true,
		wrong + " " + good:                      true,
		good + " " + wrong:                      true,
		"  " + wrong + "   " + good + " ":       true,
		"sha1=00 v0=11 " + good:                 true,
		strings.ToUpper(good[:7]) + good[7:]:    false,
		"sha256=" + strings.ToUpper(good[7:]):   true,
		wrong:                                   false,
		"sha1=00 v0=11":                         false,
		strings.Repeat(wrong+" ", 8) + good:     false, // the ninth signature
		strings.Repeat(wrong+" ", 7) + good:     true,
		good[:len(good)-2]:                      false,
		good + "00":                             false,
		"":                                      false,
		strings.Replace(good, "sha256=", "", 1): false,
		strings.Replace(good, "sha256=", "sha256", 1): false,
	} {
		_, err := p.Verify(body, hdr(sig), now)
		if ok {
			assert.NoError(t, err, sig)
		} else {
			assert.ErrorIs(t, err, platform.ErrUnauthenticated, sig)
		}
	}
	k, err := p.Extract(body, hdr(good))
	require.NoError(t, err)
	assert.Equal(t, dedupe.Key{Channel: "hook", MessageID: "d-1"}, k)
	_, err = p.Extract(body, http.Header{})
	assert.ErrorIs(t, err, dedupe.ErrNoMessageID)
	_, err = p.Extract(body, http.Header{"X-Delivery": {"a", "b"}})
	assert.ErrorIs(t, err, dedupe.ErrInvalidKey, "an id header twice")
	_, err = p.Extract(body, http.Header{"X-Delivery": {"a\x00b"}})
	assert.ErrorIs(t, err, dedupe.ErrInvalidKey)
}

// TestRulePointer runs the JSON Pointers of RFC 6901, section 5, on its
// example document, and the ids the rules of every preset apply to them.
func TestRulePointer(t *testing.T) {
	doc := []byte(`{"foo":["bar","baz"],"":0,"a/b":1,"c%d":2,"e^f":3,"g|h":4,"i\\j":5,"k\"l":6," ":7,"m~n":8,"n":{"id":"x"},"arr":[{"id":1},{"id":"2"}]}`)
	for ptr, want := range map[string]any{
		"/foo/0": "bar", "/foo/1": "baz", "/a~1b": "1", "/c%d": "2", "/e^f": "3", "/g|h": "4", "/i\\j": "5",
		`/k"l`: "6", "/ ": "7", "/m~0n": "8", "/n/id": "x", "/arr/1/id": "2", "/arr/0/id": "1",
		"/":    dedupe.ErrNoMessageID,                            // 0 is no id
		"/foo": dedupe.ErrInvalidKey, "/n": dedupe.ErrInvalidKey, // an array, an object
		"/foo/2": dedupe.ErrNoMessageID, "/foo/-": dedupe.ErrNoMessageID, "/foo/01": dedupe.ErrNoMessageID,
		"/foo/0/x": dedupe.ErrNoMessageID, "/missing": dedupe.ErrNoMessageID, "/a~1b/c": dedupe.ErrNoMessageID,
		"/N/id": dedupe.ErrNoMessageID, "/arr/2/id": dedupe.ErrNoMessageID,
	} {
		p, err := platform.NewPreset(platform.Rule{Name: "doc", ID: ptr,
			Signature: platform.SignatureRule{Header: "X-Sig", Encoding: "hex"}})
		require.NoError(t, err, ptr)
		k, err := p.Extract(doc, nil)
		if werr, isErr := want.(error); isErr {
			assert.ErrorIs(t, err, werr, ptr)
			continue
		}
		if assert.NoError(t, err, ptr) {
			assert.Equal(t, want, k.MessageID, ptr)
		}
	}
	p, err := platform.NewPreset(platform.Rule{Name: "doc", ID: "/a/id", Signature: platform.SignatureRule{Header: "X", Encoding: "hex"}})
	require.NoError(t, err)
	for body, want := range map[string]error{
		`{"a":{"id":"1","id":"2"}}`: dedupe.ErrInvalidKey,
		`{"a":{"id":"1"},"a":{}}`:   dedupe.ErrInvalidKey,
		`{"a":{"id":1.5}}`:          dedupe.ErrInvalidKey,
		`{"a":{"id":"\ud800"}}`:     dedupe.ErrInvalidKey,
		`{"a":{"id":""}}`:           dedupe.ErrNoMessageID,
		`{"a":{"id":null}}`:         dedupe.ErrNoMessageID,
		`{"a":{"ID":"1"}}`:          dedupe.ErrNoMessageID,
		`{"a":[{"id":"1"}]}`:        dedupe.ErrNoMessageID,
		`[{"a":{"id":"1"}}]`:        dedupe.ErrNoMessageID,
		`{"a":{"id":"1"}`:           dedupe.ErrNoMessageID,
		`{"a":{"id":"1"}} x`:        dedupe.ErrNoMessageID,
	} {
		_, err := p.Extract([]byte(body), nil)
		assert.ErrorIs(t, err, want, body)
	}
	k, err := p.Extract([]byte(`{"a":{"i\u0064":12345678901234567890123}}`), nil)
	require.NoError(t, err)
	assert.Equal(t, "12345678901234567890123", k.MessageID, "escaped names match, integers stay exact")
}

// FuzzRulePointer checks a JSON Pointer id on any body and pointer against
// encoding/json's decoding: where the pointer finds an id, encoding/json
// finds the same; where it finds none (ErrNoMessageID alone), encoding/json
// finds no non-empty string or non-zero number either. ErrInvalidKey (a
// member twice, a string that is not text, an object) is left to the
// invariants: never a panic, never another class of error.
func FuzzRulePointer(f *testing.F) {
	f.Add([]byte(`{"foo":["bar","baz"],"a/b":1,"m~n":8}`), "/foo/1")
	f.Add([]byte(`{"a/b":1}`), "/a~1b")
	f.Add([]byte(`{"data":{"object":{"id":"in_1"}}}`), "/data/object/id")
	f.Add(fixture(f, "stripe_event.json"), "/id")
	f.Add([]byte(`{"a":[0,{"b":"\u00e9"}]}`), "/a/1/b")
	f.Fuzz(func(t *testing.T, body []byte, ptr string) {
		p, err := platform.NewPreset(platform.Rule{Name: "fuzz", ID: ptr, Signature: platform.SignatureRule{Header: "X", Encoding: "hex"}})
		if err != nil {
			require.ErrorIs(t, err, platform.ErrInvalidRule)
			return
		}
		k, err := p.Extract(body, nil)
		want, found, judged := referencePointer(body, ptr)
		switch {
		case err == nil:
			require.NoError(t, k.Validate())
			if judged {
				require.True(t, found, "%q %q: found %q, encoding/json nothing", body, ptr, k.MessageID)
				require.Equal(t, want, k.MessageID, "%q %q", body, ptr)
			}
		case errors.Is(err, dedupe.ErrInvalidKey):
		case errors.Is(err, dedupe.ErrNoMessageID):
			require.False(t, judged && found, "%q %q: encoding/json finds %q, the pointer %v", body, ptr, want, err)
		default:
			t.Fatalf("%q %q: error %v is in no documented class", body, ptr, err)
		}
	})
}

// referencePointer finds the id at ptr in body with encoding/json: found
// when the value is a non-empty string or a non-zero integer. judged is
// false for a body that is not an object or a pointer it cannot follow.
func referencePointer(body []byte, ptr string) (id string, found, judged bool) {
	var top map[string]json.RawMessage
	if !utf8.Valid(body) || bytes.Contains(bytes.ToLower(body), []byte(`\ud`)) {
		return "", false, false // repaired by encoding/json, refused by the preset
	}
	if json.Unmarshal(body, &top) != nil || top == nil || !strings.HasPrefix(ptr, "/") {
		return "", false, false
	}
	var v any = top
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var raw json.RawMessage
		switch c := v.(type) {
		case map[string]json.RawMessage:
			raw = c[tok]
		case []json.RawMessage:
			var n int
			if _, err := fmt.Sscanf(tok, "%d", &n); err != nil || fmt.Sprint(n) != tok || n < 0 || n >= len(c) {
				return "", false, true
			}
			raw = c[n]
		default:
			return "", false, true
		}
		if raw == nil {
			return "", false, true
		}
		var obj map[string]json.RawMessage
		var arr []json.RawMessage
		switch {
		case json.Unmarshal(raw, &obj) == nil && obj != nil:
			v = obj
		case json.Unmarshal(raw, &arr) == nil && arr != nil:
			v = arr
		default:
			v = raw
		}
	}
	raw, ok := v.(json.RawMessage)
	if !ok {
		return "", false, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, s != "", true
	}
	var n json.Number
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if dec.Decode(&n) == nil {
		f, _ := n.Float64()
		return n.String(), f != 0, true
	}
	return "", false, true
}

// FuzzRuleConfig decodes any configuration into a Rule, makes a preset of
// it, and verifies and keys any delivery with it: a clear error or a
// result, never a panic; a Rule NewPreset accepts is one that JSON
// round-trips.
func FuzzRuleConfig(f *testing.F) {
	for _, r := range []platform.Rule{platform.GitHubRule, platform.StripeRule, platform.StandardWebhooksRule, platform.StandardWebhooksV1aRule} {
		b, err := json.Marshal(r)
		require.NoError(f, err)
		f.Add(b, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", []byte(`{"id":"evt_1"}`), "t=1764448112,v1=00 v1,AA sha256=00")
	}
	f.Fuzz(func(t *testing.T, config []byte, secret string, body []byte, sig string) {
		var r platform.Rule
		if err := json.Unmarshal(config, &r); err != nil {
			return
		}
		p, err := platform.NewPreset(r)
		if err != nil {
			require.ErrorIs(t, err, platform.ErrInvalidRule)
			return
		}
		b, err := json.Marshal(r)
		require.NoError(t, err)
		var again platform.Rule
		require.NoError(t, json.Unmarshal(b, &again))
		require.Equal(t, r, again)
		h := http.Header{}
		for _, name := range []string{r.Signature.Header, "X-GitHub-Delivery", "Webhook-Id", "Webhook-Timestamp"} {
			h.Set(name, sig)
		}
		got, err := p.WithSecret(secret).Verify(body, h, now)
		if err != nil {
			require.ErrorIs(t, err, platform.ErrUnauthenticated)
			require.Nil(t, got)
		}
		if _, err := p.Extract(body, h); err != nil {
			require.True(t, errors.Is(err, dedupe.ErrNoMessageID) || errors.Is(err, dedupe.ErrInvalidKey), "%v", err)
		}
	})
}
