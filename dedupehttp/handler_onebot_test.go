package dedupehttp_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// postOneBot posts body signed by s, as bot self does, and returns the
// status.
func postOneBot(t *testing.T, srv *httptest.Server, s *platformtest.Signer, body []byte, self string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header = s.Sign(body, clock)
	req.Header.Set("X-Self-ID", self)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode
}

// TestOneBotReplayUnderAnotherBot captures 1,000 of bot A's deliveries
// without self_id and replays each under bot B's X-Self-ID before B's real
// message with the same message_id arrives, over a real server. With one
// secret per bot the replays are refused and all of B's messages are
// processed; with one secret shared by both bots (the only way before
// WithBotSecrets) 999 to 1,000 of B's messages were dropped as duplicates.
func TestOneBotReplayUnderAnotherBot(t *testing.T) {
	const n = 1000
	a := platformtest.NewSigner("onebot", "secret-of-a")
	b := platformtest.NewSigner("onebot", "secret-of-b")
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	var runs atomic.Int64
	p := platform.OneBot.WithBotSecrets(map[string]string{"111": a.Secret(), "222": b.Secret()})
	srv := serve(t, dedupehttp.New(dedupe.New(store), p, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		runs.Add(1)
	}), dedupehttp.WithLogger(quiet)))

	message := func(id int, text string) []byte {
		return fmt.Appendf(nil, `{"time":1764448112,"post_type":"message","message_type":"group","message_id":%d,"group_id":736000111,"user_id":1145141919,"raw_message":"%s %d"}`, id, text, id)
	}
	refused := 0
	for i := range n {
		captured := message(i, "from a")
		require.Equal(t, http.StatusOK, postOneBot(t, srv, a, captured, "111"))
		if postOneBot(t, srv, a, captured, "222") == http.StatusUnauthorized {
			refused++
		}
	}
	assert.Equal(t, n, refused, "replays under B's X-Self-ID")
	for i := range n {
		found, err := store.Exists(t.Context(), dedupe.Key{Channel: "onebot", MessageID: fmt.Sprintf("222:%d", i)})
		require.NoError(t, err)
		require.False(t, found, "a replay reached the store")
	}

	processed := 0
	for i := range n {
		before := runs.Load()
		if postOneBot(t, srv, b, message(i, "from b"), "222") == http.StatusOK && runs.Load() == before+1 {
			processed++
		}
	}
	assert.Equal(t, n, processed, "B's real messages processed")
	assert.EqualValues(t, 2*n, runs.Load())
}
