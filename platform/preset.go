package platform

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Preset is what this library knows about one chat platform's webhooks: the key
// channel, which field of the delivery identifies a message across the
// platform's redeliveries, a TTL that outlasts its redelivery window, how long
// a copy may wait for the first copy's outcome before the platform gives up on
// it, and how the platform proves that a delivery comes from it. A Preset is
// plain data: copy one and change a field to adapt it, for example a Name per
// bot when several bots of one platform share a [dedupe.Store]:
//
//	bot2 := platform.Telegram.WithSecret(os.Getenv("BOT2_WEBHOOK_SECRET"))
//	bot2.Name = "telegram-bot2"
//
// The presets are [Telegram], [Slack], [Feishu], [Discord], [OneBot], [QQ],
// and, for platforms that post several events at once (see [Preset].Events),
// [LINE], [Meta] and [Matrix], then [WeChat], [WeCom], [DingTalk] and
// [DingTalkEvents] (all but DingTalk sign in the URL query: see
// [Preset.VerifyRequest]), and the webhook senders [StandardWebhooks],
// [GitHub] and [Stripe], built from a declarative [Rule] ([NewPreset]);
// [Presets] lists them. As declared they hold no secret and authenticate
// nothing: give each its secret with [Preset.WithSecret]. A Preset is safe for
// concurrent use.
type Preset struct {
	// Name is the platform's name and the Channel of every key the preset
	// extracts, for example "telegram". It must be a valid key channel.
	Name string

	// TTL is how long to remember a processed message: longer than the
	// platform redelivers a message. Pass it to [dedupe.Store.Mark] or
	// configure the [dedupe.Deduper] with it.
	TTL time.Duration

	// AckBudget is how long a copy of a message that another request is
	// processing may wait for that request's outcome (see [dedupe.WithWait])
	// before it is answered: acknowledged if the first copy was processed,
	// refused (so that the platform retries) if not. It is below the time the
	// platform waits for an answer, leaving room to answer; each preset
	// documents both. Zero or less: copies do not wait.
	AckBudget time.Duration

	// Replay is true for a platform that shows the handler's answer to the
	// user (a Slack slash command's reply, a Discord interaction's message,
	// a Feishu card's update or toast), so that a copy of a delivery must get
	// the first copy's answer, not an empty 200. dedupehttp.New then keeps
	// the handler's answer with the message's mark and replays it to
	// redeliveries and to copies that waited (see dedupehttp.WithReplay),
	// when the preset has its secret: an endpoint that authenticates nothing
	// does not replay, nor does any endpoint to a delivery that only a token
	// in its body authenticates ([Preset.TokenInBody]).
	// [Slack], [Discord] and [Feishu] set it; set it to false on a copy to
	// answer copies with an empty 200 instead.
	Replay bool

	// MessageID finds the message id in a delivery's raw body and headers;
	// header may be nil. It returns an error wrapping [ErrNotAMessage] for
	// protocol requests, [dedupe.ErrNoMessageID] for a delivery without a
	// usable id (a body that is not the expected JSON included), and
	// [dedupe.ErrInvalidKey] for an id that is not a string or an integer,
	// or that is ambiguous: a member it reads that appears twice.
	MessageID func(body []byte, header http.Header) (string, error)

	// Events, for a platform that delivers several events in one request
	// (LINE's events[], Meta's entry[], a Matrix transaction), finds each
	// event of a delivery's body (the one [Preset.Verify] returned): its id
	// across the platform's redeliveries, and its JSON as delivered. It is nil
	// for a platform with one message per delivery, whose MessageID is used
	// instead. Events that are not messages to deduplicate are left out; a
	// delivery without any returns an empty slice, not an error. An event
	// that cannot be keyed (a Messenger opt-in identified by sender.user_ref,
	// with no sender.id) is returned with its Err set, in its place among the
	// others, so that one bad event does not cost the batch: the error
	// return is for a body that is not the platform's batch at all.
	Events func(body []byte, header http.Header) ([]Event, error)

	// newVerifier makes the verifier of a secret; nil for a preset whose
	// platform this package cannot authenticate.
	newVerifier func(secret string) (verifier, error)
	// newCryptVerifier makes the verifier of a WXBizMsgCrypt configuration
	// (see WithMsgCrypt); nil for a platform that does not use it.
	newCryptVerifier func(c *msgCrypt) verifier
	// newBotVerifier makes the verifier of one secret per bot (see
	// WithBotSecrets); nil for a platform without per-bot secrets.
	newBotVerifier func(secrets map[string]string) (verifier, error)
	// takesToken is true for a platform with a Verification Token besides
	// its secret (see WithVerificationToken): Feishu.
	takesToken bool
	// token is the Verification Token given by WithVerificationToken.
	token string
	// subscribes is true for a platform that checks a webhook with a GET
	// holding a verify token (see WithVerifyToken): Meta.
	subscribes bool
	// verifyToken is the token given by WithVerifyToken.
	verifyToken string
	// verifier authenticates deliveries; nil until WithSecret.
	verifier verifier
}

// Event is one event of a delivery that carries several ([Preset].Events).
type Event struct {
	// ID is the event's id, kept across the platform's redeliveries: the
	// MessageID of its key.
	ID string
	// Raw is the event's JSON as the delivery holds it: a slice of the body,
	// not a copy.
	Raw []byte
	// Err, when not nil, says why the event cannot be keyed, and ID is then
	// "": it wraps [dedupe.ErrNoMessageID] for an event without a usable id
	// (and, with it, a [*json.UnmarshalTypeError] for an element of the wrong
	// shape), or [dedupe.ErrInvalidKey] for an id that cannot be a key. Its
	// text names the event and the field, never the id's value.
	Err error
}

// Key returns the event's key on the preset p: channel p.Name, message e.ID.
// An event with an Err has an invalid key (its MessageID is empty).
func (e Event) Key(p Preset) dedupe.Key { return dedupe.Key{Channel: p.Name, MessageID: e.ID} }

// verifier authenticates the deliveries of one platform with one secret. It
// returns the body the preset keys on: the delivery's, or its plaintext.
type verifier interface {
	verify(p *Preset, body []byte, header http.Header, now time.Time) ([]byte, error)
}

// tokenBearer is a verifier that accepts some deliveries on a token they
// carry in their body (see Preset.TokenInBody).
type tokenBearer interface {
	tokenInBody(body []byte, header http.Header) bool
}

// TokenInBody reports whether p, given its secret, authenticates the
// delivery of body and header (as received, before [Preset.Verify]) only by
// a token written in its body, the same in every delivery, rather than by a
// signature: a plain (unencrypted) [Feishu] delivery, which its Verification
// Token (header.token, token in the 1.0 schema) authenticates. Such a token
// travels with every event to whatever keeps the body (a log line, a queue,
// a handler's record of raw events), and whoever reads one can write
// deliveries that pass; so package dedupehttp replays no kept answer to such
// a delivery. It is false for every other delivery, and for a preset without
// a usable secret.
func (p Preset) TokenInBody(body []byte, header http.Header) bool {
	b, ok := p.verifier.(tokenBearer)
	return ok && b.tokenInBody(body, header)
}

// answerer is a verifier that answers a protocol request itself, because the
// answer needs the secret.
type answerer interface {
	answer(body []byte) (response []byte, ok bool)
}

// refusal is the verifier of a secret that cannot be the platform's: it
// refuses every delivery.
type refusal struct{ err error }

func (r refusal) verify(*Preset, []byte, http.Header, time.Time) ([]byte, error) { return nil, r.err }

// WithSecret returns a copy of p that authenticates deliveries with secret,
// the one the platform names (see each preset for which one, and
// [Preset.Verify] for what is checked). A secret the platform cannot have
// issued (empty, or malformed such as a Discord public key that is not 64 hex
// digits) makes the copy refuse every delivery; [Preset.CheckSecret] reports
// why. So does a secret given to a preset whose platform this package does
// not know how to authenticate (a Preset built by hand): it fails closed.
func (p Preset) WithSecret(secret string) Preset {
	var (
		v   verifier
		err error
	)
	switch {
	case p.newVerifier == nil:
		err = fmt.Errorf("%w: preset %q has no authentication scheme", ErrUnauthenticated, p.Name)
	case secret == "":
		err = fmt.Errorf("%w: %s secret is empty", ErrUnauthenticated, p.Name)
	default:
		v, err = p.newVerifier(secret)
	}
	if err != nil {
		v = refusal{err}
	}
	p.verifier = v
	return p
}

// WithBotSecrets returns a copy of p that authenticates each delivery with
// the secret of the bot that sent it, for a platform that names the bot
// beside a signature that does not cover the name: OneBot, whose X-Self-ID
// header is outside its X-Signature. secrets maps each bot's id (its
// self_id, digits) to the secret of its HTTP POST configuration. A
// delivery is then checked with the secret of the bot its self_id and its
// X-Self-ID name (both, when both are there, must agree), so a body
// captured from one bot and replayed under another's X-Self-ID is refused
// instead of taking that bot's message ids. Use it whenever several bots
// share one endpoint. The map is copied. An empty map, an id that is not
// digits, an empty secret, or a preset of another platform make the copy
// refuse every delivery ([Preset.CheckSecret] says why).
func (p Preset) WithBotSecrets(secrets map[string]string) Preset {
	var (
		v   verifier
		err error
	)
	switch {
	case p.newBotVerifier == nil:
		err = fmt.Errorf("%w: preset %q has no per-bot secrets", ErrUnauthenticated, p.Name)
	case len(secrets) == 0:
		err = fmt.Errorf("%w: %s bot secrets are empty", ErrUnauthenticated, p.Name)
	default:
		v, err = p.newBotVerifier(secrets)
	}
	if err != nil {
		v = refusal{err}
	}
	p.verifier = v
	return p
}

// CheckSecret reports how p authenticates: nil when it was given a usable
// secret, [ErrNoSecret] when it was given none (its deliveries are served
// unauthenticated), and an error wrapping [ErrUnauthenticated] that says why
// when its secret cannot be the platform's (every delivery is refused).
func (p Preset) CheckSecret() error {
	switch v := p.verifier.(type) {
	case nil:
		return fmt.Errorf("%w: %s deliveries are not authenticated", ErrNoSecret, p.Name)
	case refusal:
		return v.err
	}
	return nil
}

// Verify authenticates a delivery with the secret given by
// [Preset.WithSecret], and returns the body to extract the key from and to
// hand to the handler: body itself, or for an encrypted Feishu delivery its
// plaintext (for an unsigned url_verification, its members rebuilt, for
// [Preset.Answer]). now is the time signed timestamps are checked against.
// [WeChat], [WeCom] and [DingTalkEvents] sign in the URL query, which Verify
// does not see: it refuses their deliveries, and [Preset.VerifyRequest]
// checks them. A delivery that fails returns an error wrapping [ErrUnauthenticated]; the
// error never holds the secret. Without a secret, Verify returns body as it
// is: the delivery is not authenticated.
//
// Verify needs the HTTP headers of the delivery, which carry the signatures.
// A OneBot client connected over WebSocket has none: OneBot authenticates the
// connection (its access token) when it is made, not each frame, so such a
// client extracts keys from frames without Verify.
func (p Preset) Verify(body []byte, header http.Header, now time.Time) ([]byte, error) {
	if p.verifier == nil {
		return body, nil
	}
	return p.verifier.verify(&p, body, header, now)
}

// Answer returns the answer to a protocol request that the preset answers
// itself, because the answer needs the secret or because the request cannot
// be trusted further than its check: QQ's callback URL validation (op 13),
// Feishu's url_verification (which, encrypted, comes unsigned; see
// [Preset.WithVerificationToken]), the echostr URL checks of WeChat and
// WeCom, and DingTalk's check_url (answered with the encrypted "success").
// ok is false for any other delivery, and for a preset without a usable
// secret. Call it on a body [Preset.Verify] or [Preset.VerifyRequest]
// accepted.
func (p Preset) Answer(body []byte) (response []byte, ok bool) {
	if a, isAnswerer := p.verifier.(answerer); isAnswerer {
		return a.answer(body)
	}
	return nil, false
}

// Extract returns the key of a delivery: Channel is p.Name and MessageID what
// p.MessageID finds in body and header. The key is validated, so an error
// wraps [ErrNotAMessage], [dedupe.ErrNoMessageID] or [dedupe.ErrInvalidKey].
// Extract never decodes a number through float64: ids of any length are kept
// exactly as the platform wrote them. Member names match exactly, as the
// platform spells them ({"UPDATE_ID":5} has no update_id), a member the
// preset reads may appear once ({"update_id":1,"update_id":2} is
// [dedupe.ErrInvalidKey] alone, not [dedupe.ErrNoMessageID]: an ambiguous id
// is refused, not served without deduplication), and a string id that is not valid UTF-8, raw
// or as an escaped lone surrogate, is [dedupe.ErrInvalidKey]: two raw ids
// never give one key.
//
// Extract does not authenticate: call [Preset.Verify] first, and pass the body
// it returns. Only the OneBot preset reads a header (X-Self-ID), so header
// may be nil: a client that receives events without HTTP, such as OneBot over
// WebSocket, passes each frame as body with a nil header.
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
// [Telegram], [Slack], [Feishu], [Discord], [OneBot], [QQ], [LINE], [Meta],
// [Matrix], [WeChat], [WeCom], [DingTalk], [DingTalkEvents],
// [StandardWebhooks], [GitHub], [Stripe]. The slice is new on each call.
func Presets() []Preset {
	return []Preset{Telegram, Slack, Feishu, Discord, OneBot, QQ, LINE, Meta, Matrix,
		WeChat, WeCom, DingTalk, DingTalkEvents, StandardWebhooks, GitHub, Stripe}
}
