package platform

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Preset is what this library knows about one chat platform's webhooks: the key
// channel, which field of the delivery identifies a message across the
// platform's redeliveries, and a TTL that outlasts its redelivery window. A
// Preset is plain data: copy one and change a field to adapt it, for example a
// Name per bot when several bots of one platform share a [dedupe.Store]:
//
//	bot2 := platform.Telegram
//	bot2.Name = "telegram-bot2"
//
// The presets are [Telegram], [Slack], [Feishu], [Discord], [OneBot] and [QQ];
// [Presets] lists them. A Preset is safe for concurrent use.
type Preset struct {
	// Name is the platform's name and the Channel of every key the preset
	// extracts, for example "telegram". It must be a valid key channel.
	Name string

	// TTL is how long to remember a processed message: longer than the
	// platform redelivers a message. Pass it to [dedupe.Store.Mark] or
	// configure the [dedupe.Deduper] with it.
	TTL time.Duration

	// MessageID finds the message id in a delivery's raw body and headers;
	// header may be nil. It returns an error wrapping [ErrNotAMessage] for
	// protocol requests, [dedupe.ErrNoMessageID] for a delivery without a
	// usable id (a body that is not the expected JSON included), and
	// [dedupe.ErrInvalidKey] for an id that is not a string or an integer.
	MessageID func(body []byte, header http.Header) (string, error)
}

// Extract returns the key of a delivery: Channel is p.Name and MessageID what
// p.MessageID finds in body and header. The key is validated, so an error
// wraps [ErrNotAMessage], [dedupe.ErrNoMessageID] or [dedupe.ErrInvalidKey].
// Extract never decodes a number through float64: ids of any length are kept
// exactly as the platform wrote them.
//
// The presets of this package read the body alone, so header may be nil: a
// client that receives events without HTTP, such as OneBot over WebSocket,
// passes each frame as body with a nil header.
func (p Preset) Extract(body []byte, header http.Header) (dedupe.Key, error) {
	if p.MessageID == nil {
		return dedupe.Key{}, fmt.Errorf("%w: preset %q has no MessageID func", dedupe.ErrNoMessageID, p.Name)
	}
	id, err := p.MessageID(body, header)
	if err != nil {
		return dedupe.Key{}, err
	}
	k := dedupe.Key{Channel: p.Name, MessageID: id}
	if err := k.Validate(); err != nil {
		return dedupe.Key{}, err
	}
	return k, nil
}

// Presets returns the platform presets of this package, in the order
// [Telegram], [Slack], [Feishu], [Discord], [OneBot], [QQ]. The slice is new on
// each call.
func Presets() []Preset {
	return []Preset{Telegram, Slack, Feishu, Discord, OneBot, QQ}
}
