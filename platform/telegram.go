package platform

import (
	"crypto/subtle"
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
// AckBudget 40 s: the Bot API server drops a webhook connection idle for 60
// seconds (tdlib/telegram-bot-api, WebhookActor.cpp: HttpOutboundConnection
// with idle_timeout 60) and then sends the update again; a copy waits two
// thirds of that for the first one's outcome.
//
// Secret: the secret_token given to setWebhook, "1-256 characters. Only
// characters A-Z, a-z, 0-9, _ and - are allowed", which Telegram sends in the
// X-Telegram-Bot-Api-Secret-Token header of every webhook request (Bot API,
// setWebhook). [Preset.Verify] compares the two in constant time. The token
// does not depend on the body, so only TLS keeps it from being replayed.
//
// update_id is counted per bot ("Update identifiers start from a certain
// positive number and increase sequentially", Bot API, Update), so give each
// bot its own Name when several bots share a store. Being sequential, it also
// suits the Sequencer of package sequence.
var Telegram = Preset{
	Name:        "telegram",
	TTL:         24 * time.Hour,
	AckBudget:   40 * time.Second,
	MessageID:   telegramMessageID,
	newVerifier: newTelegramVerifier,
}

var telegramFields = [...]string{"update_id"}

func telegramMessageID(body []byte, _ http.Header) (string, error) {
	var v [len(telegramFields)][]byte
	if err := decodeBody("telegram", body, telegramFields[:], v[:]); err != nil {
		return "", err
	}
	return parseID(v[0]).require("telegram update", "update_id")
}

// telegramHeader carries the webhook's secret token.
const telegramHeader = "X-Telegram-Bot-Api-Secret-Token"

type telegramVerifier struct{ token []byte }

func newTelegramVerifier(secret string) (verifier, error) {
	if len(secret) > 256 {
		return nil, unauthenticated("telegram", "secret is longer than 256 characters")
	}
	for i := 0; i < len(secret); i++ {
		c := secret[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return nil, unauthenticated("telegram", "secret holds a character other than A-Z, a-z, 0-9, _ and -")
		}
	}
	return telegramVerifier{[]byte(secret)}, nil
}

func (v telegramVerifier) verify(_ *Preset, body []byte, h http.Header, _ time.Time) ([]byte, error) {
	got := h.Get(telegramHeader)
	if got == "" {
		return nil, unauthenticated("telegram", "request has no "+telegramHeader)
	}
	if subtle.ConstantTimeCompare([]byte(got), v.token) != 1 {
		return nil, unauthenticated("telegram", telegramHeader+" does not match the secret")
	}
	return body, nil
}
