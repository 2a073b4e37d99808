package dedupehttp_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
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
