package platform_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// signOneBot signs body as bot self does with its secret, X-Self-ID
// included (go-cqhttp sends it on every HTTP POST).
func signOneBot(s *platformtest.Signer, body []byte, self string) http.Header {
	h := s.Sign(body, now)
	if self != "" {
		h.Set("X-Self-ID", self)
	}
	return h
}

// TestWithBotSecrets checks that each delivery is verified with the secret
// of the bot it names, so that a body replayed under another bot's
// X-Self-ID is refused.
func TestWithBotSecrets(t *testing.T) {
	a := platformtest.NewSigner("onebot", "secret-of-a")
	b := platformtest.NewSigner("onebot", "secret-of-b")
	p := platform.OneBot.WithBotSecrets(map[string]string{"111": a.Secret(), "222": b.Secret()})
	require.NoError(t, p.CheckSecret())

	noSelf := []byte(`{"time":1764448112,"post_type":"message","message_type":"group","message_id":7,"raw_message":"hi"}`)
	withSelf := []byte(`{"time":1764448112,"self_id":111,"post_type":"message","message_type":"group","message_id":7,"raw_message":"hi"}`)

	for name, c := range map[string]struct {
		body []byte
		h    http.Header
		key  string
	}{
		"header names a":        {noSelf, signOneBot(a, noSelf, "111"), "111:7"},
		"header names b":        {noSelf, signOneBot(b, noSelf, "222"), "222:7"},
		"body names a":          {withSelf, signOneBot(a, withSelf, ""), "111:7"},
		"body and header agree": {withSelf, signOneBot(a, withSelf, "111"), "111:7"},
	} {
		got, err := p.Verify(c.body, c.h, now)
		require.NoError(t, err, name)
		k, err := p.Extract(got, c.h)
		require.NoError(t, err, name)
		assert.Equal(t, c.key, k.MessageID, name)
	}

	for name, c := range map[string]struct {
		body []byte
		h    http.Header
	}{
		"a's body as b":          {noSelf, signOneBot(a, noSelf, "222")},
		"a's body, b's self_id":  {withSelf, signOneBot(a, withSelf, "222")},
		"b signs a's self_id":    {withSelf, signOneBot(b, withSelf, "")},
		"an unknown bot":         {noSelf, signOneBot(a, noSelf, "333")},
		"no bot named":           {noSelf, signOneBot(a, noSelf, "")},
		"header not digits":      {noSelf, signOneBot(a, noSelf, "1x1")},
		"no signature":           {noSelf, http.Header{"X-Self-Id": {"111"}}},
		"not JSON":               {[]byte("hi"), signOneBot(a, []byte("hi"), "111")},
		"self_id not an integer": {[]byte(`{"self_id":"a1"}`), signOneBot(a, []byte(`{"self_id":"a1"}`), "")},
	} {
		_, err := p.Verify(c.body, c.h, now)
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, name)
	}

	for name, q := range map[string]platform.Preset{
		"empty map":      platform.OneBot.WithBotSecrets(nil),
		"id not digits":  platform.OneBot.WithBotSecrets(map[string]string{"bot1": "s"}),
		"empty secret":   platform.OneBot.WithBotSecrets(map[string]string{"111": ""}),
		"another preset": platform.Telegram.WithBotSecrets(map[string]string{"111": "s"}),
	} {
		assert.ErrorIs(t, q.CheckSecret(), platform.ErrUnauthenticated, name)
		_, err := q.Verify(noSelf, signOneBot(a, noSelf, "111"), now)
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, "%s: fails closed", name)
	}

	secrets := map[string]string{"111": a.Secret()}
	q := platform.OneBot.WithBotSecrets(secrets)
	secrets["111"] = "changed"
	_, err := q.Verify(noSelf, signOneBot(a, noSelf, "111"), now)
	assert.NoError(t, err, "the map is copied")
}
