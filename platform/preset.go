package platform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
)

// ErrNotAMessage reports a delivery that is part of a platform's protocol rather
// than a message: a URL verification challenge (Slack, Feishu/Lark, QQ op 13), a
// Discord PING, a OneBot heartbeat, a Slack rate-limit notice. It needs no
// deduplication and must reach the handler, which answers it.
//
// ErrNotAMessage matches [dedupe.ErrNoMessageID] too, so code that passes deliveries
// without a message id through to the handler treats these the same way; test
// for ErrNotAMessage first when the two must be told apart.
var ErrNotAMessage error = notAMessageError{}

type notAMessageError struct{}

func (notAMessageError) Error() string { return "dedupe: platform: not a message" }

// Is makes [ErrNotAMessage] match [dedupe.ErrNoMessageID].
func (notAMessageError) Is(target error) bool { return target == dedupe.ErrNoMessageID }

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
	// platform redelivers a message. Pass it to [dedupe.Store.Mark] or configure the
	// [dedupe.Deduper] with it.
	TTL time.Duration

	// MessageID finds the message id in a delivery's raw body and headers. It
	// returns an error wrapping [ErrNotAMessage] for protocol requests,
	// [dedupe.ErrNoMessageID] for a delivery without a usable id (a body that is not
	// the expected JSON included), and [dedupe.ErrInvalidKey] for an id that is not a
	// string or an integer.
	MessageID func(body []byte, header http.Header) (string, error)
}

// Extract returns the key of a delivery: Channel is p.Name and MessageID what
// p.MessageID finds in body and header. The key is validated, so an error
// wraps [ErrNotAMessage], [dedupe.ErrNoMessageID] or [dedupe.ErrInvalidKey]. Extract never
// decodes a number through float64: ids of any length are kept exactly as the
// platform wrote them.
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

// Slack is the preset for the Slack Events API. The key is the envelope's
// event_id, "a unique identifier for this specific event, globally unique
// across all workspaces", which a retry repeats. Retries carry the headers
// X-Slack-Retry-Num (1, 2, 3) and X-Slack-Retry-Reason (such as
// "http_timeout"); the key does not depend on them, so a retry is found to be
// a copy of its first delivery.
//
// TTL 1 h: Slack retries a delivery that got no 2xx within 3 seconds three
// times, "nearly immediately", "after 1 minute" and "after 5 minutes" (Events
// API, "Retries"), so the last copy comes about 6 minutes after the first. A
// TTL never under 10 minutes is needed; an hour leaves room for delays on
// either side at little cost.
//
// A url_verification challenge or an app_rate_limited notice returns
// [ErrNotAMessage].
var Slack = Preset{
	Name:      "slack",
	TTL:       time.Hour,
	MessageID: slackMessageID,
}

type slackEnvelope struct {
	Type    string `json:"type"`
	EventID jsonID `json:"event_id"`
}

func slackMessageID(body []byte, _ http.Header) (string, error) {
	var e slackEnvelope
	if err := decodeBody("slack", body, &e); err != nil {
		return "", err
	}
	switch e.Type {
	case "url_verification", "app_rate_limited":
		return "", fmt.Errorf("%w: slack %s", ErrNotAMessage, e.Type)
	}
	return e.EventID.require("slack event", "event_id")
}

// Feishu is the preset for Feishu/Lark event subscriptions (request URL mode,
// schema 2.0). For im.message.receive_v1 the key is the message's id,
// event.message.message_id ("om_…"), not header.event_id: Feishu may push the
// same message more than once under different event ids, and the message id is
// what stays (in the 1.0 schema, a "message" event's event.open_message_id,
// not its uuid). Other event types carry no message of their own (a reaction or a
// recall names the message it is about, and must not be taken for a copy of
// it), so for them the key is header.event_id (uuid in the 1.0 schema), a best
// effort that catches retries of one push.
//
// TTL 12 h: when the request URL does not answer with HTTP 200 within 3
// seconds, Feishu pushes the event again after 15 s, 5 min, 1 h and 6 h (Feishu
// Open Platform, event subscription, "retry"), about 7 h 5 min in all. Twelve
// hours cover that with margin and are half the memory of the 24 h default.
//
// A url_verification challenge returns [ErrNotAMessage]. A body encrypted with
// the app's Encrypt Key ({"encrypt": "…"}) must be decrypted before Extract;
// as it stands it returns an error wrapping [dedupe.ErrNoMessageID].
var Feishu = Preset{
	Name:      "feishu",
	TTL:       12 * time.Hour,
	MessageID: feishuMessageID,
}

type feishuEvent struct {
	Schema  string `json:"schema"`
	Type    string `json:"type"`
	UUID    jsonID `json:"uuid"`
	Encrypt string `json:"encrypt"`
	Header  struct {
		EventID   jsonID `json:"event_id"`
		EventType string `json:"event_type"`
	} `json:"header"`
	Event struct {
		Type          string `json:"type"`            // 1.0 schema
		OpenMessageID jsonID `json:"open_message_id"` // 1.0 schema
		Message       struct {
			MessageID jsonID `json:"message_id"`
		} `json:"message"`
	} `json:"event"`
}

func feishuMessageID(body []byte, _ http.Header) (string, error) {
	var e feishuEvent
	if err := decodeBody("feishu", body, &e); err != nil {
		return "", err
	}
	switch {
	case e.Type == "url_verification":
		return "", fmt.Errorf("%w: feishu url_verification", ErrNotAMessage)
	case e.Encrypt != "":
		return "", fmt.Errorf("%w: feishu body is encrypted: decrypt it with the app's Encrypt Key first", dedupe.ErrNoMessageID)
	case e.Header.EventType == "im.message.receive_v1":
		return e.Event.Message.MessageID.require("feishu im.message.receive_v1", "event.message.message_id")
	case e.Schema == "" && e.Event.Type == "message":
		return e.Event.OpenMessageID.require("feishu 1.0 message event", "event.open_message_id")
	case e.Schema == "":
		return e.UUID.require("feishu 1.0 event", "uuid")
	}
	return e.Header.EventID.require("feishu event", "header.event_id")
}

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
// requests return [dedupe.ErrNoMessageID]; meta events (heartbeat, lifecycle) return
// [ErrNotAMessage].
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

// QQ is the preset for the QQ official bot platform's webhook (HTTP callback).
// The key is the event id, the payload's top-level id, on an op 0 dispatch
// such as GROUP_AT_MESSAGE_CREATE or C2C_MESSAGE_CREATE. Each event has its own
// id, so a MESSAGE_DELETE is not taken for a copy of the message it deletes.
//
// TTL 24 h, the library's [dedupe.DefaultTTL]: the QQ bot documentation asks for an
// answer (op 12) to each callback but gives no redelivery schedule to size a
// shorter TTL from, and the NekoBot gateway keeps QQ keys for 24 h.
//
// The callback URL validation (op 13) and any op other than 0 return
// [ErrNotAMessage]. Verify the request's Ed25519 signature before trusting it;
// this preset does not.
var QQ = Preset{
	Name:      "qq",
	TTL:       dedupe.DefaultTTL,
	MessageID: qqMessageID,
}

type qqPayload struct {
	Op jsonID `json:"op"`
	ID jsonID `json:"id"`
}

func qqMessageID(body []byte, _ http.Header) (string, error) {
	var p qqPayload
	if err := decodeBody("qq", body, &p); err != nil {
		return "", err
	}
	if p.Op.kind != kindAbsent && !(p.Op.kind == kindNumber && p.Op.text == "0") {
		return "", fmt.Errorf("%w: qq op %s", ErrNotAMessage, p.Op.text)
	}
	return p.ID.require("qq event", "id")
}

// decodeBody decodes a platform's JSON body into v, a small struct of the
// fields a preset needs; the rest of the body is skipped, not built.
func decodeBody(name string, body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %s body is not the expected JSON: %w", dedupe.ErrNoMessageID, name, err)
	}
	return nil
}

// Kinds of JSON value a jsonID holds.
const (
	kindAbsent = iota // absent or null
	kindString
	kindNumber
	kindFalse
	kindOther // true, an object or an array
)

// jsonID is a JSON value that should be an id: a string, or a number kept as
// the literal the platform wrote, never converted to float64.
type jsonID struct {
	text string
	kind uint8
}

// UnmarshalJSON records the value's kind and text. It never fails: what the
// value means is decided by require, which knows the field's name.
func (j *jsonID) UnmarshalJSON(b []byte) error {
	switch c := b[0]; {
	case c == '"':
		j.kind = kindString
		if bytes.IndexByte(b, '\\') < 0 {
			j.text = string(b[1 : len(b)-1])
			return nil
		}
		return json.Unmarshal(b, &j.text)
	case c == '-' || '0' <= c && c <= '9':
		j.kind, j.text = kindNumber, string(b)
	case c == 'n':
		*j = jsonID{}
	case c == 'f':
		*j = jsonID{kind: kindFalse}
	default:
		*j = jsonID{kind: kindOther}
	}
	return nil
}

// require returns the id as written, with the rules of [dedupe.ExtractKey]: absent,
// null, "", false and numeric zero are no id ([dedupe.ErrNoMessageID]); a number must
// be an integer; true, objects and arrays are [dedupe.ErrInvalidKey]. what and field
// name the id in errors.
func (j jsonID) require(what, field string) (string, error) {
	var (
		id  string
		ok  bool
		err error
	)
	switch j.kind {
	case kindString:
		id, ok = j.text, j.text != ""
	case kindNumber:
		var integer bool
		if ok, integer = numberID(j.text); !integer {
			err = fmt.Errorf("%w: %s %s %s is not an integer", dedupe.ErrInvalidKey, what, field, j.text)
		}
		id = j.text
	case kindOther:
		err = fmt.Errorf("%w: %s %s is not a string or a number", dedupe.ErrInvalidKey, what, field)
	}
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", fmt.Errorf("%w: %s has no %s", dedupe.ErrNoMessageID, what, field)
	}
	return id, nil
}

// numberID applies the rules [dedupe.ExtractKey] has for a [json.Number] to
// the number literal s: a zero is no id (ok is false), and any other number
// must be an integer, written with digits alone.
func numberID(s string) (ok, integer bool) {
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == 0 {
		return false, true
	}
	return true, isDigits(s)
}

// isDigits reports whether s is a decimal integer: digits with an optional
// leading minus sign.
func isDigits(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
