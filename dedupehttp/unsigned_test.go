package dedupehttp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// TestUnsignedDeliveryLogged refuses, within one minute (an injected
// clock), a delivery with a wrong signature, then one without any, then
// another wrong one, on presets that sign the body or send a token: each of
// the first two is logged at warn level with the same fields (platform,
// remote_addr, error), the error saying what was missing or wrong; the third
// repeats the first's cause and is held back, as a flood would be. Before,
// the unsigned delivery was held back behind the wrong one and left no
// record (1 record of 3 refusals, 2 of 2 expected).
func TestUnsignedDeliveryLogged(t *testing.T) {
	for _, c := range []struct {
		preset  platform.Preset
		signer  string
		missing string // what the unsigned delivery's error names
	}{
		{platform.LINE, "line", "X-Line-Signature"},
		{platform.Meta, "meta", "X-Hub-Signature-256"},
		{platform.Telegram, "telegram", "X-Telegram-Bot-Api-Secret-Token"},
		{platform.Slack, "slack", "X-Slack-"},
		{platform.GitHub, "github", "X-Hub-Signature-256"},
	} {
		t.Run(c.preset.Name, func(t *testing.T) {
			var logs logBuffer
			now := clock
			signer := platformtest.NewSigner(c.signer, "the_real_secret_of_sixteen_bytes")
			forger := platformtest.NewSigner(c.signer, "a_guessed_secret_also_long")
			h := dedupehttp.New(dedupe.New(nil), signer.Preset(c.preset), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
				dedupehttp.WithLogger(logs.logger()), dedupehttp.WithClock(func() time.Time { return now }))
			body := []byte(`{"update_id":1,"type":"event_callback","event_id":"Ev1","events":[],"entry":[]}`)
			for _, header := range []http.Header{forger.Sign(body, clock), {"Content-Type": {"application/json"}}, forger.Sign(body, clock)} {
				w := deliver(h, body, header)
				require.Equal(t, http.StatusUnauthorized, w.Code)
				now = now.Add(10 * time.Second)
			}
			assert.Equal(t, uint64(3), h.Stats().Unauthenticated)
			var refused []map[string]any
			for _, rec := range logs.records(t) {
				if rec["msg"] == "dedupe: dedupehttp: unauthenticated delivery refused" {
					refused = append(refused, rec)
				}
			}
			require.Len(t, refused, 2, "the wrong signature and the missing one are each logged once")
			for _, rec := range refused {
				assert.Equal(t, "WARN", rec["level"])
				assert.Equal(t, c.preset.Name, rec["platform"])
				assert.NotEmpty(t, rec["remote_addr"])
				assert.NotEmpty(t, rec["error"])
			}
			assert.NotContains(t, refused[0]["error"], "has no "+c.missing, "the first is the wrong signature")
			assert.Contains(t, refused[1]["error"], c.missing, "the second names what the unsigned delivery lacks")
			assert.NotContains(t, logs.String(), signer.Secret())
		})
	}
}
