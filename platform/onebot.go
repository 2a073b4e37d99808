package platform

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe"
)

// OneBot is the preset for OneBot v11 events, posted by reverse HTTP or sent over
// (reverse) WebSocket by go-cqhttp, NapCat, Lagrange and the like. The key's
// MessageID is "{self_id}:{message_id}": OneBot message ids are 32-bit numbers
// counted per bot, so two bots in one group report different ids for one
// message, and one id may mean different messages to different bots. Keeping
// the channel "onebot" (a channel cannot contain ':') and the bot in the id lets
// one store serve many bots.
//
// Only message events (post_type "message" and "message_sent") have a key: a
// notice such as group_recall carries the message_id of the message it is
// about, so keying it would drop it as a copy of that message. Notices and
// requests return [dedupe.ErrNoMessageID]; meta events (heartbeat, lifecycle)
// return [ErrNotAMessage].
//
// Over WebSocket there are no HTTP headers, and none are needed: pass each
// event frame to [Preset.Extract] with a nil header.
//
// TTL 10 min: OneBot v11 defines no redelivery; copies come from a bot
// connected twice (HTTP and WebSocket) or replays on reconnect, seconds apart.
// Implementations such as go-cqhttp derive message_id from a 32-bit hash, so
// the longer the TTL, the likelier a new message is taken for an older one with
// the same id: for a bot seeing 10,000 messages an hour, about once in 11 days
// with 10 minutes, about 13 times a day with 24 h.
var OneBot = Preset{
	Name:      "onebot",
	TTL:       10 * time.Minute,
	MessageID: oneBotMessageID,
}

type oneBotEvent struct {
	PostType  string `json:"post_type"`
	SelfID    jsonID `json:"self_id"`
	MessageID jsonID `json:"message_id"`
}

func oneBotMessageID(body []byte, _ http.Header) (string, error) {
	var e oneBotEvent
	if err := decodeBody("onebot", body, &e); err != nil {
		return "", err
	}
	switch e.PostType {
	case "message", "message_sent":
	case "meta_event":
		return "", fmt.Errorf("%w: onebot meta_event", ErrNotAMessage)
	default:
		return "", fmt.Errorf("%w: onebot %q event is not a message", dedupe.ErrNoMessageID, e.PostType)
	}
	self, err := e.SelfID.require("onebot event", "self_id")
	if err != nil {
		return "", err
	}
	id, err := e.MessageID.require("onebot message", "message_id")
	if err != nil {
		return "", err
	}
	return self + ":" + id, nil
}
