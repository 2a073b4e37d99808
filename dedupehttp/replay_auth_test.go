package dedupehttp_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// TestReplayOnlyAuthenticated serves, for each preset with Replay given no
// secret, a delivery and then a forged copy of it (the same body, which
// nothing authenticates): the copy gets the plain duplicate answer, not the
// first one; and so does a copy behind Middleware given WithReplay without
// WithVerify. WithReplayUnauthenticated restores the replay. Before replay
// asked for authentication, every forged copy got the first answer.
func TestReplayOnlyAuthenticated(t *testing.T) {
	const answer = `{"type":4,"data":{"content":"only for the one who asked"}}`
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	cases := []struct {
		preset platform.Preset
		body   []byte
		header http.Header
	}{
		{platform.Slack, platformFixture(t, "slack_slash_command.form"), form},
		{platform.Discord, platformFixture(t, "discord_application_command.json"), nil},
		{platform.Feishu, platformFixture(t, "feishu_card_action.json"), nil},
	}
	for _, c := range cases {
		endpoints := map[string]func(next http.Handler, opts ...dedupehttp.Option) http.Handler{
			"New": func(next http.Handler, opts ...dedupehttp.Option) http.Handler {
				return dedupehttp.New(dedupe.New(nil), c.preset, next, opts...)
			},
			"Middleware+WithReplay": func(next http.Handler, opts ...dedupehttp.Option) http.Handler {
				opts = append(opts, dedupehttp.WithReplay())
				return dedupehttp.Middleware(dedupe.New(nil), dedupehttp.FromPreset(c.preset), opts...)(next)
			},
		}
		for name, endpoint := range endpoints {
			t.Run(c.preset.Name+"/"+name, func(t *testing.T) {
				var calls int
				handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					calls++
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, answer)
				})

				h := endpoint(handler, dedupehttp.WithLogger(quiet))
				first := deliver(h, c.body, c.header)
				assert.Equal(t, answer, first.Body.String())
				forged := deliver(h, c.body, c.header)
				assert.Equal(t, http.StatusOK, forged.Code)
				assert.Equal(t, "duplicate", forged.Header().Get(dedupehttp.HeaderVerdict))
				assert.Empty(t, forged.Body.String(), "a forged copy got the first answer")
				assert.Equal(t, 1, calls)

				optedIn := endpoint(handler, dedupehttp.WithLogger(quiet), dedupehttp.WithReplayUnauthenticated())
				deliver(optedIn, c.body, c.header)
				again := deliver(optedIn, c.body, c.header)
				assert.Equal(t, "replayed", again.Header().Get(dedupehttp.HeaderVerdict), "opted in")
				assert.Equal(t, answer, again.Body.String(), "opted in")
			})
		}
	}
}

// TestReplayOffWarned checks that the warning of an unauthenticated
// endpoint built to replay says that it does not.
func TestReplayOffWarned(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []dedupehttp.Option
		off  bool
	}{
		{"no secret", nil, true},
		{"opted in", []dedupehttp.Option{dedupehttp.WithReplayUnauthenticated()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			dedupehttp.New(dedupe.New(nil), platform.Slack, http.NotFoundHandler(), append(tc.opts, dedupehttp.WithLogger(logs.logger()))...)
			recs := logs.records(t)
			if assert.Len(t, recs, 1) {
				assert.Equal(t, "WARN", recs[0]["level"])
				assert.Equal(t, tc.off, recs[0]["replay"] != nil, "%v", recs[0])
			}
		})
	}
}

// TestReplayFeishuTokenNotEnough serves Feishu card callbacks to presets
// that hold the Verification Token: alone (an app without an Encrypt Key,
// given with WithVerificationToken or WithSecret), and beside an Encrypt
// Key. After a first delivery, 20 forged copies of it per preset (the same
// event_id and token, written by whoever has seen one body, another
// operator) each get the plain duplicate answer, never the first one: a
// token in the body proves nothing a reader of that body cannot write.
// Before, 60 of 60 forged copies got the first answer. A genuine copy signed
// with the Encrypt Key is still replayed.
func TestReplayFeishuTokenNotEnough(t *testing.T) {
	const (
		token  = "066zT6pS4QCbgj5Do145GfDbbagCHGgF" // header.token of the fixture
		answer = `{"toast":{"type":"success","content":"approved for ou_84aad35d084aa403a838cf73ee18467"}}`
	)
	card := platformFixture(t, "feishu_card_action.json")
	forged := func(i int) []byte {
		return bytes.Replace(card, []byte("ou_84aad35d084aa403a838cf73ee18467"), fmt.Appendf(nil, "ou_forger%d", i), 1)
	}
	signer := platformtest.NewSigner("feishu", "the-encrypt-key-of-the-app")
	for _, tc := range []struct {
		name   string
		preset platform.Preset
		signed bool // the first delivery and the control copy are encrypted and signed
	}{
		{"WithVerificationToken", platform.Feishu.WithVerificationToken(token), false},
		{"WithSecret(token)", platform.Feishu.WithSecret(token), false},
		{"Encrypt Key and token", signer.Preset(platform.Feishu).WithVerificationToken(token), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			h := dedupehttp.New(dedupe.New(nil), tc.preset, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				calls++
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, answer)
			}), dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet))
			genuine := func() (body []byte, header http.Header) {
				if !tc.signed {
					return card, nil
				}
				body = signer.Encrypt(card)
				return body, signer.Sign(body, clock)
			}
			body, header := genuine()
			first := deliver(h, body, header)
			require.Equal(t, answer, first.Body.String())
			replayed := 0
			for i := range 20 {
				w := deliver(h, forged(i), nil)
				assert.Equal(t, http.StatusOK, w.Code, "copy %d", i)
				if w.Body.String() == answer || w.Header().Get(dedupehttp.HeaderVerdict) == "replayed" {
					replayed++
				}
			}
			assert.Zero(t, replayed, "forged copies that got the first answer, of 20")
			assert.Equal(t, 1, calls)
			if tc.signed {
				body, header := genuine()
				again := deliver(h, body, header)
				assert.Equal(t, "replayed", again.Header().Get(dedupehttp.HeaderVerdict), "a genuine signed copy")
				assert.Equal(t, answer, again.Body.String())
			}
		})
	}
}
