package dedupegotelegram_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe/contrib/dedupegotelegram"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/gatewaykit/dedupe/reply/replytest"
	"github.com/go-telegram/bot"
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
		b, err := bot.New("123:token", bot.WithServerURL(baseURL), bot.WithSkipGetMe(),
			bot.WithHTTPClient(time.Minute, &http.Client{Timeout: 2 * time.Second}))
		require.NoError(t, err)
		return dedupegotelegram.SendMessage(b, bot.SendMessageParams{ChatID: chat})
	})
}
