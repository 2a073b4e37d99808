package dedupediscordgo_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// interactions is the handler of Example_interactionsEndpoint: it answers a
// PING with a PONG and an interaction with a message, failing (500) while
// fail is above zero, and counts the interactions it answered or failed.
type interactions struct{ runs, fail atomic.Int32 }

func (h *interactions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in discordgo.Interaction
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	resp := discordgo.InteractionResponse{Type: discordgo.InteractionResponsePong}
	if in.Type != discordgo.InteractionPing {
		h.runs.Add(1)
		if h.fail.Add(-1) >= 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		resp = discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: "pong"}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// postSigned posts body as Discord does, signed with key, and returns the
// status and the answer.
func postSigned(t *testing.T, url string, key ed25519.PrivateKey, body string) (int, string) {
	t.Helper()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Signature-Timestamp", ts)
	req.Header.Set("X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(key, []byte(ts+body))))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, strings.TrimSpace(string(answer))
}

// TestInteractionsEndpoint serves an Interactions Endpoint URL as the package
// doc says, with dedupehttp and platform.Discord: the PING is answered, a
// forgery gets 401 and runs nothing, a failed interaction is answered 500
// and released, and of its copies one runs and the others are answered as
// duplicates.
func TestInteractionsEndpoint(t *testing.T) {
	pub, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	_, forger, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	h := &interactions{}
	h.fail.Store(1)
	discord := platform.Discord.WithSecret(hex.EncodeToString(pub))
	srv := httptest.NewServer(dedupehttp.New(dedupe.New(nil), discord, h))
	t.Cleanup(srv.Close)

	status, answer := postSigned(t, srv.URL, key, `{"id": "1", "application_id": "2", "type": 1, "token": "t", "version": 1}`)
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"type": 1}`, answer, "PONG")

	status, _ = postSigned(t, srv.URL, forger, interaction("2001"))
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Zero(t, h.runs.Load(), "a forgery runs nothing")

	var statuses []int
	for range 3 {
		status, _ := postSigned(t, srv.URL, key, interaction("2001"))
		statuses = append(statuses, status)
	}
	assert.Equal(t, []int{500, 200, 200}, statuses)
	assert.EqualValues(t, 2, h.runs.Load(), "the failure, then the copy that was processed")
}
