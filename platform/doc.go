// Package platform knows, for each chat platform, which id of a delivery
// identifies its message across the platform's redeliveries, and how long the
// platform redelivers: what a gateway needs to key a [dedupe.Store] with it.
//
//	k, err := platform.Telegram.Extract(body, header)
//	if errors.Is(err, dedupe.ErrNoMessageID) {
//		// a handshake, a heartbeat or an event without a message: no key
//	}
//
// # Presets
//
// A [Preset] is plain data: a Name, which is the Channel of every key it
// extracts; a TTL, longer than the platform's redelivery window; and a
// MessageID func that finds the id in the raw body. The presets are
// [Telegram], [Slack], [Feishu], [Discord], [OneBot] and [QQ], each documented
// with the id it keys on and where its TTL comes from; [Presets] lists them.
// Copy one and change a field to adapt it: a Name per bot when several bots of
// one platform share a store, or another TTL. A Preset is safe for concurrent
// use.
//
// The key is chosen to be the same for every copy of a message and different
// for every other event: a reaction or a recall names the message it is about
// but is never keyed by that message's id (it has its own event id, or no
// key), so that it is not dropped as a copy of that message. Ids are kept exactly as the platform wrote them, never decoded
// through float64, so Discord snowflakes and other ids beyond 2^53 stay exact.
//
// # Errors
//
// [Preset.Extract] sorts what is not a message into three classes, matched
// with [errors.Is]:
//
//	ErrNotAMessage          a protocol request: URL verification, PING,
//	                        heartbeat. It needs no deduplication; answer it.
//	                        It also matches dedupe.ErrNoMessageID.
//	dedupe.ErrNoMessageID   no usable id: a notice, an encrypted body, a body
//	                        that is not the expected JSON.
//	dedupe.ErrInvalidKey    an id that is not a string or an integer.
//
// # Without HTTP
//
// The presets read the body alone. A gateway that receives events over a
// WebSocket (OneBot, for example) passes each frame to Extract with a nil
// header. Package dedupehttp makes an HTTP middleware's extractor of a preset
// with dedupehttp.FromPreset.
package platform
