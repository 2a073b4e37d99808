package dedupetgbotapi_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupetgbotapi"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/gatewaykit/dedupe/reply/replytest"
	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newAPI serves a fake Bot API (reply/replytest) for t, whose next calls
// take faults: [replytest.BadGateway] (posted, then a 502 HTML page),
// [replytest.Hang] (posted, no answer until the client gives up),
// [replytest.Reject] (400), [replytest.Throttle] (429, retry after 5) and
// [replytest.FailBefore] (5xx without posting).
func newAPI(t *testing.T, faults ...replytest.Fault) *replytest.Server {
	t.Helper()
	api := replytest.New(replytest.Config{})
	_, err := api.Start()
	require.NoError(t, err)
	t.Cleanup(api.Close)
	api.Next(faults...)
	return api
}

// replySend is the SendFunc under test, on a bot of api, to chat 7.
func replySend(t *testing.T, api *replytest.Server) reply.SendFunc {
	b, err := tgbotapi.NewBotAPIWithClient("123:token", api.URL()+"/bot%s/%s", &http.Client{Timeout: 2 * time.Second})
	require.NoError(t, err)
	return dedupetgbotapi.SendMessage(b, tgbotapi.NewMessage(7, ""))
}

// posted counts the replies "pong" in chat 7.
func posted(api *replytest.Server) int { return api.Count("7", "pong") }

var replyKey = dedupe.Key{Channel: "telegram", MessageID: "8817"}

func composeText(text string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) { return []byte(text), nil }
}

// TestReplyOutcomes: an answered 4xx is NotSent and the next Send sends the
// reply; a send Telegram posted but whose answer was lost (a 502, a timeout)
// or a 5xx is unknown: at most once (the preset) does not send it again and
// reports it possibly lost, at least once sends it again and reports a
// possible duplicate.
func TestReplyOutcomes(t *testing.T) {
	for _, x := range []struct {
		fault   replytest.Fault
		notSent bool
		posted  int // by the first send
	}{{replytest.Reject, true, 0}, {replytest.Throttle, true, 0}, {replytest.FailBefore, false, 0},
		{replytest.BadGateway, false, 1}, {replytest.Hang, false, 1}} {
		for _, policy := range []reply.Policy{reply.AtMostOnce, reply.AtLeastOnce} {
			t.Run(x.fault.String()+"/"+policy.String(), func(t *testing.T) {
				t.Parallel()
				api := newAPI(t, x.fault)
				send := replySend(t, api)
				sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Telegram, reply.WithPolicy(policy))
				_, err := sender.Send(context.Background(), replyKey, 0, composeText("pong"), send)
				require.Error(t, err)
				assert.Equal(t, x.notSent, reply.IsNotSent(err), "%v", err)
				assert.Equal(t, x.posted, posted(api))

				rc, err := sender.Send(context.Background(), replyKey, 0, nil, send)
				switch {
				case x.notSent:
					require.NoError(t, err)
					assert.False(t, rc.MaybeDuplicate)
					assert.Equal(t, 1, posted(api))
				case policy == reply.AtMostOnce:
					assert.True(t, errors.Is(err, reply.ErrMaybeLost), "%v", err)
					assert.Equal(t, x.posted, posted(api))
				default:
					require.NoError(t, err)
					assert.True(t, rc.MaybeDuplicate)
					assert.Equal(t, x.posted+1, posted(api))
				}
			})
		}
	}
}

func TestReplySent(t *testing.T) {
	api := newAPI(t)
	sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Telegram)
	rc, err := sender.Send(context.Background(), replyKey, 0, composeText("pong"), replySend(t, api))
	require.NoError(t, err)
	assert.Equal(t, "1", rc.ID)
	rc, err = sender.Send(context.Background(), replyKey, 0, composeText("pong"), replySend(t, api))
	require.NoError(t, err)
	assert.False(t, rc.Sent)
	assert.Equal(t, 1, posted(api))
	assert.Len(t, api.Messages(), 1)
}
