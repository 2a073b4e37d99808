package reply

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// discordBase is the address of Discord's HTTP API.
const discordBase = "https://discord.com"

// DiscordCreateMessage returns a [SendFunc] that posts the body (Create
// Message's JSON params, {"content": …} and the like; no files) to the
// channel channelID with POST /api/v10/channels/{channel.id}/messages, with
// the reply's token as its nonce and enforce_nonce true (the [Sender]'s token,
// a [Nonce] with the [Discord] preset; a Nonce of the key and slot when the
// platform has none). The members nonce and enforce_nonce of the body are
// replaced.
//
// Discord documents both in Create Message
// (https://discord.com/developers/docs/resources/message#create-message):
// nonce, "up to 25 characters"; enforce_nonce: "If true and nonce is present,
// it will be checked for uniqueness in the past few minutes. If another
// message was created by the same author with the same nonce, that message
// will be returned and no new message will be created." So a second attempt
// within those minutes gets the first message back, 200 with its id. The
// outcome is:
//
//   - 200: sent (or sent before); the id is the message's.
//   - a 4xx (400, 403 missing access, 404, 429 rate limit): [NotSent].
//   - a 5xx, a timeout, a cut connection: unknown.
func DiscordCreateMessage(api API, channelID string) SendFunc {
	path := "/api/v10/channels/" + url.PathEscape(channelID) + "/messages"
	return func(ctx context.Context, m Message) (string, error) {
		body, err := withMembers("discord", m.Body, map[string]any{
			"nonce":         tokenOr(m, Nonce),
			"enforce_nonce": true,
		})
		if err != nil {
			return "", err
		}
		h := http.Header{"Authorization": {"Bot " + api.Credential}}
		a, err := api.call(ctx, "discord", http.MethodPost, discordBase, path, h, body)
		if err != nil {
			return "", err
		}
		if a.status/100 != 2 {
			return "", statusError("discord", a)
		}
		var r struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(a.body, &r) // sent whatever the body: the id is a courtesy
		return r.ID, nil
	}
}
