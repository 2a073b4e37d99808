// Package platform knows, for each chat platform, which id of a delivery
// identifies its message across the platform's redeliveries, and how long the
// platform redelivers: what a gateway needs to key a [dedupe.Store] with it.
//
//	k, err := platform.Telegram.Extract(body, header)
//	if errors.Is(err, dedupe.ErrNoMessageID) {
//		// a handshake, a heartbeat or an event without a message: no key
//	}
//
// Give a preset its platform's secret with [Preset.WithSecret] and hand it to
// dedupehttp.New, which authenticates, extracts and deduplicates each
// delivery. ExamplePreset_Extract, in example_test.go, runs the extraction
// above, compiled and checked by go test.
//
// # Presets
//
// A [Preset] is plain data: a Name, which is the Channel of every key it
// extracts; a TTL, longer than the platform's redelivery window; an
// AckBudget, how long a copy may wait for the first copy's outcome, below the
// time the platform waits for an answer; a MessageID func that finds the
// id in the raw body; and Replay, set when the platform shows the handler's
// answer to the user (Slack interactions and slash commands, Discord
// interactions, Feishu card callbacks), so that package dedupehttp answers a
// copy with the first answer (only a copy the secret authenticates: not one
// that only a token in its body does, see [Preset.TokenInBody]). The
// presets are
// [Telegram], [Slack], [Feishu], [Discord], [OneBot], [QQ], [LINE], [Meta],
// [Matrix], [WeChat], [WeCom], [DingTalk], [DingTalkEvents], [StandardWebhooks],
// [GitHub] and [Stripe], each documented with the id it keys on and where its TTL
// comes from; [Presets] lists them.
// Copy one and change a field to adapt it: a Name per bot when several bots of
// one platform share a store, or another TTL. A Preset is safe for concurrent
// use.
//
// # Rules
//
// A webhook source that signs with HMAC-SHA256 or Ed25519 and keys on a
// header or a member of its body needs no code: describe it with a [Rule]
// (the id as "header:Name" or a JSON Pointer, RFC 6901; the signed content
// as a template such as "{id}.{timestamp}.{body}"; hex or base64; the
// prefix and separator of its signatures; a signed timestamp and its
// tolerance; the TTL), decode it from a configuration file with
// encoding/json, and make a preset of it with [NewPreset], which checks it:
// among other things that the signature covers the timestamp and an id
// header (unless [Rule].UnsignedID accepts an unsigned id, as GitHub's
// needs), and, when the preset is given its secret, that an HMAC key has at
// least [MinSecretSize] bytes.
// [GitHub] and [Stripe] are Rules, and [StandardWebhooks] is two. rule.go,
// rule_verify.go and pointer.go hold the grammar; one file per sender
// (standardwebhooks.go, github.go, stripe.go) holds its preset.
//
// # Batches
//
// LINE, Meta (WhatsApp, Messenger, Instagram) and a Matrix homeserver post
// several events in one request, and a redelivery may repeat some of them
// beside new ones. Their presets set [Preset].Events, which returns each
// event of a delivery with its own id ([Event]): LINE's webhookEventId,
// Meta's message ids and status ids, Matrix's event_id. Deduplicate each
// event, not the delivery (package dedupehttp does, for these presets).
// Their MessageID keys a delivery that holds one event and returns
// [dedupe.ErrNoMessageID] for several. An event that cannot be keyed (a
// Messenger opt-in identified by sender.user_ref) is returned in its place
// with its [Event].Err, so that it costs neither the batch nor the others. One file per platform (line.go,
// meta.go, matrix.go) holds its preset, its keys and its authentication.
//
// The key is chosen to be the same for every copy of a message and different
// for every other event: a reaction or a recall names the message it is about
// but is never keyed by that message's id (it has its own event id, or no
// key), so that it is not dropped as a copy of that message. Ids are kept exactly as the platform wrote them, never decoded
// through float64, so Discord snowflakes and other ids beyond 2^53 stay exact.
//
// # Authentication
//
// As declared the presets authenticate nothing. [Preset.WithSecret] gives a
// preset the secret its platform names (Telegram's secret_token, Slack's
// Signing Secret, Feishu's Encrypt Key or Verification Token, Discord's
// application Public Key, OneBot's HTTP POST secret, QQ's AppSecret, LINE's
// channel secret, Meta's App Secret, a Matrix application service's
// hs_token, a Standard Webhooks "whsec_" secret or "whpk_" public key,
// GitHub's webhook secret, Stripe's signing secret), and
// [Preset.Verify] then checks a delivery's signature, token or encryption
// before anything is read from it, returning an error wrapping
// [ErrUnauthenticated] for a forgery and the body to key on (for Feishu, the
// decrypted one) for an authentic delivery. Each preset documents its scheme
// and source. Verify uses only the standard library, and compares in constant
// time. Signed timestamps are checked against replays: within 5 minutes for
// Slack, Standard Webhooks and Stripe, as they ask, and within the preset's
// TTL for the others, since a
// replay older than the TTL would no longer be found a duplicate.
// [Preset.CheckSecret] says whether a preset authenticates, and
// [Preset.Answer] answers QQ's callback URL validation, which needs the
// secret, and Feishu's url_verification (see [Preset.WithVerificationToken]).
// Several OneBot bots on one endpoint each sign with a secret of their own:
// [Preset.WithBotSecrets]. Meta checks a webhook with an unsigned GET:
// [Preset.WithVerifyToken] and [Preset.AnswerSubscription] answer it. LINE,
// Meta, Matrix and GitHub sign no timestamp, so their deliveries are not checked
// against replays beyond the TTL. WeChat, WeCom and DingTalk's event
// subscriptions sign in the URL query and encrypt with WXBizMsgCrypt: give
// their token, EncodingAESKey and receiver id with [Preset.WithMsgCrypt],
// authenticate with [Preset.VerifyRequest], which sees the query, and
// encrypt answers with [Preset.Seal]. Package platformtest signs deliveries as
// the platforms do, for tests.
//
// Member names are matched exactly, as the platform spells them, never
// case-insensitively as encoding/json's struct decoding does, a member read
// twice makes the id ambiguous ([dedupe.ErrInvalidKey], refused rather than
// served without deduplication), and a string id that is not valid UTF-8 is
// refused rather than repaired, so two raw ids never give one key.
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
// The presets read the body (and OneBot the X-Self-ID header when the body
// has no self_id). A gateway that receives events over a WebSocket (OneBot,
// for example) passes each frame to Extract with a nil header; OneBot
// authenticates such a connection when it is made, not frame by frame. Package dedupehttp makes an HTTP middleware's extractor of a preset
// with dedupehttp.FromPreset.
package platform
