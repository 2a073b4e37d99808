package dedupetelebot_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe/contrib/dedupetelebot"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/gatewaykit/dedupe/reply/replytest"
	"github.com/stretchr/testify/require"
	tele "gopkg.in/telebot.v3"
)

// TestReply: on a fake Bot API (reply/replytest), an answered 4xx (400, 429)
// is NotSent and the next Send sends the reply; a send Telegram posted but
// whose answer was lost (a 502 HTML page, a timeout) or a 5xx is unknown: at
// most once (the preset) does not send it again and reports it possibly
// lost, at least once sends it again and reports a possible duplicate; a
// reply sent is sent once, its id the message_id.
func TestReply(t *testing.T) {
	replytest.RunTelegram(t, func(t *testing.T, baseURL string, chat int64) reply.SendFunc {
		b, err := tele.NewBot(tele.Settings{Token: "123:token", URL: baseURL, Offline: true,
			Client: &http.Client{Timeout: 2 * time.Second}})
		require.NoError(t, err)
		return dedupetelebot.Send(b, &tele.Chat{ID: chat})
	})
}
