package platform

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// Meta is the preset for the webhooks of Meta's messaging products: the
// WhatsApp Business Platform (Cloud API), Messenger and Instagram messaging.
// Meta posts a batch, {"object": …, "entry": [ … ]}, each entry holding
// several changes (WhatsApp) or messaging events (Messenger, Instagram):
// "entry is an array and may contain multiple objects, so ensure your code
// iterates over it to process all events" (Messenger Platform, Webhook,
// https://developers.facebook.com/docs/messenger-platform/webhook). The
// preset keys each event with [Preset.Events]:
//
//	WhatsApp message     message:{id}                     entry[].changes[].value.messages[].id, the wamid
//	WhatsApp status      status:{id}:{status}             entry[].changes[].value.statuses[]
//	Messenger/Instagram  message:{mid}                    entry[].messaging[].message.mid
//	postback             postback:{mid}                   entry[].messaging[].postback.mid
//	reaction             reaction:{sender}:{timestamp}:{action}:{mid}
//	any other event      event:{kind}:{sender}:{timestamp}  (read, delivery, optin, referral, …)
//
// Why these: a WhatsApp message, a reaction to it included, has its own
// wamid, kept across redeliveries. A status names the message it is about,
// and one outgoing message gets several (sent, delivered, read): keyed by the
// id alone, "delivered" would be dropped as a copy of "sent", so the status
// is part of the key, and a redelivered "delivered" is still one key. A
// Messenger reaction carries the mid of the message it reacts to, not one of
// its own ("reaction": {"action": "react", "mid": …}): keyed by that mid it
// would be dropped as a copy of the message, so it is keyed by who reacted,
// when (the event's timestamp, which a redelivery repeats), the action and
// the mid. Events without an id of their own (reads, deliveries, opt-ins)
// are keyed by their kind (the member that holds them), their sender and
// their timestamp. Each kind has its own prefix, senders (PSIDs, IGSIDs)
// must be digits and kinds, actions and statuses lower-case words, so that no
// two events give one key. A change without messages or statuses (account or
// template updates, page feed changes) has no event: a handler that wants
// them reads the delivery's body. Every event's Raw is its element (a
// messages[], statuses[] or messaging[] object); the metadata beside it (the
// phone_number_id a WhatsApp reply needs) is in the body.
//
// MessageID returns the key of a body with one event, [ErrNotAMessage] for
// one without events, and [dedupe.ErrNoMessageID] for one with several: key
// those with Events.
//
// TTL 8 days: WhatsApp retries a delivery that did not get a 200 "with
// decreasing frequency until the request succeeds, for up to 7 days" (Cloud
// API, Webhooks, https://developers.facebook.com/docs/whatsapp/cloud-api/guides/set-up-webhooks;
// Meta's partner 360dialog says the same: "Meta retries failed webhooks for
// up to 7 days using exponential backoff", https://docs.360dialog.com/docs/messaging/webhook);
// for other objects, "we will retry immediately, then try a few more times
// with decreasing frequency over the next 36 hours" (Graph API, Webhooks,
// Getting Started, Event Notifications,
// https://developers.facebook.com/docs/graph-api/webhooks/getting-started/).
// A day of margin covers the longer of the two; an app on Messenger and
// Instagram only may set 48 h on a copy.
//
// AckBudget 3 s: Meta's own deadline is "A webhook call with timeout after
// 20 seconds" (Messenger Platform Technical FAQ,
// https://developers.facebook.com/docs/messenger-platform/faq); for WhatsApp
// the Business Solution Providers in front of it may be shorter: "A
// notification is considered successfully delivered when the Webhook URL
// returns an HTTP 200 OK response within 5 seconds" (360dialog, above). The
// budget stays under the shorter one, leaving two seconds for the network
// and the answer.
//
// Secret: the App Secret. Meta sends X-Hub-Signature-256, "sha256=" and the
// hex HMAC-SHA256 of the body as sent, keyed with it (Graph API, Webhooks,
// Getting Started, "Validating Payloads"), which [Preset.Verify] checks in
// constant time; the SHA-1 X-Hub-Signature is not accepted. Meta signs no
// timestamp: a captured delivery can be replayed, and is caught as a copy
// only while its keys are remembered (the TTL).
//
// Subscription check: when a webhook is configured, Meta sends GET
// ?hub.mode=subscribe&hub.challenge=…&hub.verify_token=… and expects the
// challenge back. It is not signed; give the preset the Verify Token of the
// App Dashboard with [Preset.WithVerifyToken], and answer the GET with
// [Preset.AnswerSubscription], which echoes the challenge only for that token.
var Meta = Preset{
	Name:        "meta",
	TTL:         8 * 24 * time.Hour,
	AckBudget:   3 * time.Second,
	MessageID:   metaMessageID,
	Events:      metaEvents,
	newVerifier: newMetaVerifier,
	subscribes:  true,
}

var (
	metaFields          = [...]string{"entry"}
	metaEntryFields     = [...]string{"changes", "messaging"}
	metaChangeFields    = [...]string{"value"}
	metaValueFields     = [...]string{"messages", "statuses"}
	metaStatusFields    = [...]string{"id", "status"}
	metaMessagingFields = [...]string{"sender", "timestamp", "message", "postback", "reaction"}
	metaMidFields       = [...]string{"mid", "action"}
	metaSenderFields    = [...]string{"id"}
)

func metaMessageID(body []byte, h http.Header) (string, error) {
	evs, err := metaEvents(body, h)
	return onlyEvent("meta", "delivery without messages or statuses", evs, err)
}

func metaEvents(body []byte, _ http.Header) ([]Event, error) {
	var v [len(metaFields)][]byte
	if err := decodeBody("meta", body, metaFields[:], v[:]); err != nil {
		return nil, err
	}
	if v[0] == nil {
		return nil, fmt.Errorf("%w: meta body has no entry", dedupe.ErrNoMessageID)
	}
	// An element that cannot be keyed, at any level, is one event with its
	// Err, in its place: the walk goes on with the others.
	evs := []Event{}
	err := elements("meta", "entry", v[0], func(entry []byte) error {
		var f [len(metaEntryFields)][]byte
		if err := element("meta", "entry[]", entry, metaEntryFields[:], f[:]); err != nil {
			evs = append(evs, keyEvent(entry, "", err))
			return nil
		}
		err := elements("meta", "entry[].changes", f[0], func(c []byte) error {
			if err := metaChange(c, &evs); err != nil {
				evs = append(evs, keyEvent(c, "", err))
			}
			return nil
		})
		if err == nil {
			err = elements("meta", "entry[].messaging", f[1], func(m []byte) error {
				id, err := metaMessaging(m)
				evs = append(evs, keyEvent(m, id, err))
				return nil
			})
		}
		if err != nil { // changes or messaging is not an array
			evs = append(evs, keyEvent(entry, "", err))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// metaChange adds the WhatsApp messages and statuses of a change to evs, a
// message or status that cannot be keyed with its Err. It returns an error
// for a change that is not the expected JSON.
func metaChange(c []byte, evs *[]Event) error {
	var f [len(metaChangeFields)][]byte
	var val [len(metaValueFields)][]byte
	if err := element("meta", "changes[]", c, metaChangeFields[:], f[:]); err != nil {
		return err
	}
	if f[0] == nil || isNull(f[0]) {
		return nil
	}
	if err := element("meta", "changes[].value", f[0], metaValueFields[:], val[:]); err != nil {
		return err
	}
	err := elements("meta", "value.messages", val[0], func(m []byte) error {
		var id [1][]byte
		s, err := "", element("meta", "messages[]", m, metaStatusFields[:1], id[:])
		if err == nil {
			s, err = parseID(id[0]).require("meta whatsapp message", "id")
		}
		*evs = append(*evs, keyEvent(m, "message:"+s, err))
		return nil
	})
	if err != nil {
		return err
	}
	return elements("meta", "value.statuses", val[1], func(m []byte) error {
		id, err := metaStatus(m)
		*evs = append(*evs, keyEvent(m, id, err))
		return nil
	})
}

// metaStatus returns the key of a WhatsApp status.
func metaStatus(m []byte) (string, error) {
	var st [len(metaStatusFields)][]byte
	if err := element("meta", "statuses[]", m, metaStatusFields[:], st[:]); err != nil {
		return "", err
	}
	id, err := parseID(st[0]).require("meta whatsapp status", "id")
	if err != nil {
		return "", err
	}
	status, err := stringField("meta", "status", st[1])
	switch {
	case err != nil:
		return "", err
	case status == "":
		return "", fmt.Errorf("%w: meta whatsapp status has no status", dedupe.ErrNoMessageID)
	case !wordOK(status):
		return "", fmt.Errorf("%w: meta whatsapp status %q is not a lower-case word", dedupe.ErrInvalidKey, status)
	}
	return "status:" + id + ":" + status, nil
}

// metaMessaging returns the key of a Messenger or Instagram messaging event.
func metaMessaging(m []byte) (string, error) {
	var f [len(metaMessagingFields)][]byte
	if err := element("meta", "messaging[]", m, metaMessagingFields[:], f[:]); err != nil {
		return "", err
	}
	// A message or a postback with a mid of its own is keyed by it.
	for _, k := range [...]struct {
		kind string
		raw  []byte
	}{{"message", f[2]}, {"postback", f[3]}} {
		if k.raw == nil || k.raw[0] != '{' {
			continue
		}
		var mid [len(metaMidFields)][]byte
		if err := object("meta", k.kind, k.raw, metaMidFields[:], mid[:]); err != nil {
			return "", err
		}
		if parseID(mid[0]).kind != kindAbsent {
			id, err := parseID(mid[0]).require("meta "+k.kind, "mid")
			return k.kind + ":" + id, err
		}
	}
	who, err := metaSenderAndTime(f[0], f[1])
	if err != nil {
		return "", err
	}
	if r := f[4]; r != nil && r[0] == '{' {
		var mid [len(metaMidFields)][]byte
		if err := object("meta", "reaction", r, metaMidFields[:], mid[:]); err != nil {
			return "", err
		}
		action, err := stringField("meta", "reaction.action", mid[1])
		if err == nil && !wordOK(action) {
			err = fmt.Errorf("%w: meta reaction action %q is not a lower-case word", dedupe.ErrInvalidKey, action)
		}
		if err != nil {
			return "", err
		}
		id, err := parseID(mid[0]).require("meta reaction", "mid")
		return "reaction:" + who + ":" + action + ":" + id, err
	}
	kind, err := metaKind(m)
	return "event:" + kind + ":" + who, err
}

// metaSenderAndTime returns "{sender.id}:{timestamp}" of a messaging event,
// both digits.
func metaSenderAndTime(sender, ts []byte) (string, error) {
	var id [len(metaSenderFields)][]byte
	if err := object("meta", "sender", sender, metaSenderFields[:], id[:]); err != nil {
		return "", err
	}
	s, err := parseID(id[0]).require("meta messaging event", "sender.id")
	if err != nil {
		return "", err
	}
	t, err := parseID(ts).require("meta messaging event", "timestamp")
	if err != nil {
		return "", err
	}
	if !digitsOK(s) || !digitsOK(t) {
		return "", fmt.Errorf("%w: meta messaging event sender.id or timestamp is not digits", dedupe.ErrInvalidKey)
	}
	return s + ":" + t, nil
}

// metaKind returns the name of the first member of a messaging event, other
// than sender and recipient, whose value is an object: "read", "delivery",
// "optin", and so on.
func metaKind(m []byte) (string, error) {
	sc := jsonscan.NewScanner(m)
	more := !sc.Open()
	for more {
		key, escaped, v, ok := member(&sc)
		if !ok {
			break
		}
		name := string(key)
		if escaped {
			b, _ := jsonscan.AppendUnquote(nil, key)
			name = string(b)
		}
		if v[0] == '{' && name != "sender" && name != "recipient" {
			if !wordOK(name) {
				return "", fmt.Errorf("%w: meta messaging event kind %q is not a lower-case word", dedupe.ErrInvalidKey, name)
			}
			return name, nil
		}
		more, _ = sc.Next('}')
	}
	return "", fmt.Errorf("%w: meta messaging event holds no event object", dedupe.ErrNoMessageID)
}

// metaHeader carries the signature.
const metaHeader = "X-Hub-Signature-256"

type metaVerifier struct{ key []byte }

func newMetaVerifier(secret string) (verifier, error) { return metaVerifier{[]byte(secret)}, nil }

func (v metaVerifier) verify(_ *Preset, body []byte, h http.Header, _ time.Time) ([]byte, error) {
	got := h.Get(metaHeader)
	if got == "" {
		return nil, unauthenticated("meta", "request has no "+metaHeader)
	}
	sig, ok := strings.CutPrefix(got, "sha256=")
	if !ok {
		return nil, unauthenticated("meta", metaHeader+" does not start with sha256=")
	}
	mac := hmac.New(sha256.New, v.key)
	mac.Write(body)
	if !equalHex(sig, mac.Sum(nil)) {
		return nil, unauthenticated("meta", metaHeader+" does not match the body")
	}
	return body, nil
}

// WithVerifyToken returns a copy of p that answers Meta's subscription check
// with [Preset.AnswerSubscription]: token is the Verify Token typed in the
// App Dashboard's Webhooks settings (Graph API, Webhooks, Getting Started,
// "Verification Requests"). Give it besides the App Secret of
// [Preset.WithSecret], which authenticates the event notifications. An empty
// token, or a preset of another platform, makes the copy refuse every
// delivery ([Preset.CheckSecret] says why).
func (p Preset) WithVerifyToken(token string) Preset {
	switch {
	case !p.subscribes:
		p.verifier = refusal{unauthenticated(p.Name, "has no subscription check: WithVerifyToken is for Meta")}
	case token == "":
		p.verifier = refusal{unauthenticated(p.Name, "verify token is empty")}
	default:
		p.verifyToken = token
	}
	return p
}

// AnswerSubscription answers Meta's subscription check, the GET request
// Meta sends when a webhook is configured, whose query holds hub.mode
// "subscribe", hub.verify_token and hub.challenge: "Verify that the
// hub.verify_token value matches the string you set in the Verify Token
// field … Respond with the hub.challenge value" (Graph API, Webhooks,
// Getting Started). ok is true, and challenge the body to answer with 200
// and Content-Type text/plain, only when p was given a verify token with
// [Preset.WithVerifyToken], each parameter appears once, the mode is
// "subscribe", the token matches (compared in constant time) and the
// challenge is a plain identifier (letters, digits, '-' and '_', at most 128;
// Meta's is an integer), so that nothing else is ever echoed. Answer any
// other GET with 403.
func (p Preset) AnswerSubscription(query url.Values) (challenge []byte, ok bool) {
	if p.verifyToken == "" {
		return nil, false
	}
	mode, token, c := query["hub.mode"], query["hub.verify_token"], query["hub.challenge"]
	if len(mode) != 1 || len(token) != 1 || len(c) != 1 || mode[0] != "subscribe" {
		return nil, false
	}
	match := subtle.ConstantTimeCompare([]byte(token[0]), []byte(p.verifyToken)) == 1
	ok = match && c[0] != "" && len(c[0]) <= maxChallenge
	for i := 0; ok && i < len(c[0]); i++ {
		b := c[0][i]
		ok = 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '-' || b == '_'
	}
	if !ok {
		return nil, false
	}
	return []byte(c[0]), true
}
