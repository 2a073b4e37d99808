package dedupetgbotapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe/contrib/dedupetgbotapi"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/gatewaykit/dedupe/reply/replytest"
	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/stretchr/testify/require"
)

// TestReply: on a fake Bot API (reply/replytest), an answered 4xx (400, 429)
// is NotSent and the next Send sends the reply; a send Telegram posted but
// whose answer was lost (a 502 HTML page, a timeout) or a 5xx is unknown: at
// most once (the preset) does not send it again and reports it possibly
// lost, at least once sends it again and reports a possible duplicate; a
// reply sent is sent once, its id the message_id.
func TestReply(t *testing.T) {
	replytest.RunTelegram(t, func(t *testing.T, baseURL string, chat int64) reply.SendFunc {
		b, err := tgbotapi.NewBotAPIWithClient("123:token", baseURL+"/bot%s/%s", &http.Client{Timeout: 2 * time.Second})
		require.NoError(t, err)
		return dedupetgbotapi.SendMessage(b, tgbotapi.NewMessage(chat, ""))
	})
}
