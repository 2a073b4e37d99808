package reply_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/reply"
)

// The tokens are fixed by their definition: a change would make a process
// of a new version send again what an old one sent, under a new token.
func TestTokensStable(t *testing.T) {
	k := dedupe.Key{Channel: "line", MessageID: "468789577898262530"}
	assert.Equal(t, "28b2a7e6-8b28-8bc1-96fb-8a73a5cd2647", reply.UUID(k, 0))
	assert.Equal(t, "48b4c2a5-cb1c-825f-9dde-ca23d484bd34", reply.UUID(k, 1))
	assert.Equal(t, "2eqlk2bgliu4vizcve5vjesef", reply.Nonce(k, 0))
	assert.Equal(t, "4ayh04t7hmx9unwq1qi4ybh2s", reply.Nonce(k, 1))
	assert.Equal(t, reply.UUID(k, 7), reply.UUID(dedupe.Key{Channel: "line", MessageID: "468789577898262530"}, 7))
}

var (
	uuidForm  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	nonceForm = regexp.MustCompile(`^[0-9a-z]{25}$`)
)

// Every token has its platform's form, and tokens differ between slots,
// channels and message ids, also where a naive concatenation would not
// ("a:b" + "c" and "a" + "b:c"; "1" slot 23 and "12" slot 3).
func TestTokensFormAndDistinct(t *testing.T) {
	keys := []dedupe.Key{
		{Channel: "line", MessageID: "1"}, {Channel: "line", MessageID: "12"}, {Channel: "discord", MessageID: "1"},
		{Channel: "a", MessageID: "b:c"}, {Channel: "ab", MessageID: "c"}, {Channel: "feishu", MessageID: strings.Repeat("x", 256)},
	}
	uuids, nonces := map[string]string{}, map[string]string{}
	for _, k := range keys {
		for _, slot := range []int{0, 1, 3, 23, 1 << 40} {
			what := fmt.Sprintf("%s slot %d", k, slot)
			u, n := reply.UUID(k, slot), reply.Nonce(k, slot)
			assert.Regexp(t, uuidForm, u, what)
			assert.Regexp(t, nonceForm, n, what)
			if prev, ok := uuids[u]; ok {
				t.Errorf("UUID of %s = UUID of %s", what, prev)
			}
			if prev, ok := nonces[n]; ok {
				t.Errorf("Nonce of %s = Nonce of %s", what, prev)
			}
			uuids[u], nonces[n] = what, what
		}
	}
	// Leading zeros are kept: 25 characters whatever the hash.
	for i := range 2000 {
		n := reply.Nonce(dedupe.Key{Channel: "discord", MessageID: fmt.Sprint(i)}, 0)
		if len(n) != 25 {
			t.Fatalf("Nonce %q of %d characters", n, len(n))
		}
	}
}

func TestPresets(t *testing.T) {
	for _, p := range []reply.Platform{reply.LINE, reply.Discord, reply.Feishu, reply.WeCom, reply.Telegram, reply.Slack} {
		assert.NotEmpty(t, p.Name)
		assert.NotZero(t, p.Policy, p.Name)
		if p.Policy == reply.Native {
			assert.Positive(t, p.Window, p.Name)
		}
	}
	k := dedupe.Key{Channel: "feishu", MessageID: "om_1"}
	assert.LessOrEqual(t, len(reply.Feishu.Token(k, 0)), 50, "Feishu's uuid is at most 50 characters")
	assert.LessOrEqual(t, len(reply.Discord.Token(k, 0)), 25, "Discord's nonce is at most 25 characters")
	assert.Nil(t, reply.WeCom.Token, "WeCom's duplicate check is by content")
	assert.Nil(t, reply.Telegram.Token)
	assert.Nil(t, reply.Slack.Token)
}
