package platform

import (
	"fmt"
	"net/http"
	"time"
)

// Discord is the preset for Discord interactions received at an Interactions
// Endpoint URL. The key is the interaction's id, a snowflake such as
// "1187654321098765432", kept exact (a float64 would lose its last digits).
//
// TTL 1 h: Discord does not redeliver an interaction; it needs an answer within
// 3 seconds and the interaction token stays valid for 15 minutes (Discord
// developer docs, Receiving and Responding to interactions). Copies come from
// proxies and gateway retries within that time, and a copy arriving later could
// not be answered anyway. Snowflakes never repeat, so the TTL only bounds
// memory.
//
// A PING (type 1), which Discord sends to check the endpoint, returns
// [ErrNotAMessage]. Verify the request's Ed25519 signature before trusting it;
// this preset does not.
var Discord = Preset{
	Name:      "discord",
	TTL:       time.Hour,
	MessageID: discordMessageID,
}

type discordInteraction struct {
	Type jsonID `json:"type"`
	ID   jsonID `json:"id"`
}

func discordMessageID(body []byte, _ http.Header) (string, error) {
	var in discordInteraction
	if err := decodeBody("discord", body, &in); err != nil {
		return "", err
	}
	if in.Type.kind == kindNumber && in.Type.text == "1" {
		return "", fmt.Errorf("%w: discord PING", ErrNotAMessage)
	}
	return in.ID.require("discord interaction", "id")
}
