package reply

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// telegramBase is the address of Telegram's Bot API.
const telegramBase = "https://api.telegram.org"

// TelegramMethod returns a [SendFunc] that calls the Bot API method
// ("sendMessage", "sendPhoto" with a file id or URL, …) with the body as its
// JSON parameters, POST /bot{token}/{method}.
//
// Telegram takes no idempotency token on its send methods
// (https://core.telegram.org/bots/api#making-requests), and a bot cannot read
// a chat's history back (getUpdates does not carry the bot's own messages),
// so no read-back check is possible either: a send whose outcome is unknown
// is either not sent again ([AtMostOnce], the [Telegram] preset's policy: the
// reply may be lost, and [Sender.Send] reports it with [ErrMaybeLost]) or
// sent again ([AtLeastOnce] with [WithPolicy]: it may be shown twice, and the
// receipt says MaybeDuplicate). The outcome is:
//
//   - 200 with "ok": true: sent; the id is result.message_id.
//   - a 4xx (400 bad request, 403 blocked by the user, 429 "Too Many
//     Requests: retry after N"), or "ok": false: [NotSent].
//   - a 5xx, a timeout, a cut connection: unknown.
func TelegramMethod(api API, method string) SendFunc {
	path := "/bot" + api.Credential + "/" + method
	return func(ctx context.Context, m Message) (string, error) {
		a, err := api.call(ctx, "telegram", http.MethodPost, telegramBase, path, nil, m.Body)
		if err != nil {
			return "", err
		}
		if a.status/100 != 2 {
			return "", statusError("telegram", a)
		}
		var r struct {
			OK          bool   `json:"ok"`
			Description string `json:"description"`
			Result      struct {
				MessageID int64 `json:"message_id"`
			} `json:"result"`
		}
		if err := json.Unmarshal(a.body, &r); err != nil {
			return "", fmt.Errorf("reply: telegram: reading the answer: %w", err)
		}
		if !r.OK {
			return "", NotSent(fmt.Errorf("reply: telegram answered not ok: %s", r.Description))
		}
		return strconv.FormatInt(r.Result.MessageID, 10), nil
	}
}
