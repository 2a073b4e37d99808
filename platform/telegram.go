package platform

import (
	"net/http"
	"time"
)

// Telegram is the preset for Telegram Bot API webhooks (setWebhook). The key is
// the Update's update_id, which Telegram repeats on every redelivery of the
// update.
//
// TTL 24 h: "Incoming updates are stored on the server until the bot receives
// them either way, but they will not be kept longer than 24 hours" (Bot API,
// Getting updates), and a webhook request that fails is repeated: "we will
// repeat the request and give up after a reasonable amount of attempts"
// (setWebhook). A mark made when the update is processed, after it was
// created, therefore outlives every copy.
//
// update_id is counted per bot ("Update identifiers start from a certain
// positive number and increase sequentially", Bot API, Update), so give each
// bot its own Name when several bots share a store. Being sequential, it also
// suits the Sequencer of package sequence.
var Telegram = Preset{
	Name:      "telegram",
	TTL:       24 * time.Hour,
	MessageID: telegramMessageID,
}

type telegramUpdate struct {
	UpdateID jsonID `json:"update_id"`
}

func telegramMessageID(body []byte, _ http.Header) (string, error) {
	var u telegramUpdate
	if err := decodeBody("telegram", body, &u); err != nil {
		return "", err
	}
	return u.UpdateID.require("telegram update", "update_id")
}
