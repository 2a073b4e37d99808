package platform

import "time"

// Stripe is the preset for Stripe webhook endpoints. The key is the event's
// id ("evt_…", the body's /id): "Webhook endpoints might occasionally receive
// the same event more than once. You can guard against duplicated event
// receipts by logging the event IDs you've processed" (Receive Stripe events
// in your webhook endpoint, https://docs.stripe.com/webhooks, Handle
// duplicate events). A retry posts the same event, id included.
//
// TTL 96 h: "Stripe automatically resends the undelivered events to your
// endpoint for up to three days" in live mode, three times over a few hours
// in a sandbox (Process undelivered webhook events,
// https://docs.stripe.com/webhooks/process-undelivered-events); a day of
// margin is added.
//
// AckBudget 2 s: Stripe asks for a 2xx "quickly", "prior to any complex
// logic that could cause a timeout", and publishes no deadline (Stripe
// support, Webhooks: how to investigate and fix "Timed out"); the shortest
// figure reported for it, 3 seconds, is assumed, and a second is left for
// the network and the answer. A copy that cannot wait is refused and
// retried by Stripe.
//
// Secret: the endpoint's signing secret ("whsec_…", used as it is written,
// prefix included). Stripe sends Stripe-Signature,
// "t=1492774577,v1=5257a869…,v0=6ffbb59b…": the timestamp, and the hex
// HMAC-SHA256 of "{t}.{body}" keyed with the secret, once for each of the
// endpoint's secrets while one is rolled (several v1 entries). v0 entries
// are test-mode signatures with another scheme and are skipped, as
// stripe-go's webhook.ValidatePayload skips them (Verify webhook
// signatures, https://docs.stripe.com/webhooks#verify-manually).
// [Preset.Verify] accepts a delivery when one v1 signature matches, and
// refuses a t more than 300 seconds from now, the SDKs' default tolerance
// (stripe-go, webhook.DefaultTolerance), against replays: a retry is signed
// anew with a new t and is found a copy by the event's id, which is signed
// with the body.
//
// The preset is the [Rule] [StripeRule]: its grammar reads Stripe's
// header, the timestamp being the entry with the prefix "t=".
var Stripe = mustPreset(StripeRule)

// StripeRule is the [Rule] of the [Stripe] preset, as its JSON writes it:
//
//	{"name": "stripe", "id": "/id", "timestamp": "signature:t=", "tolerance": "5m0s",
//	 "ttl": "96h0m0s", "ack_budget": "2s",
//	 "signature": {"header": "Stripe-Signature", "signed": "{timestamp}.{body}",
//	  "encoding": "hex", "prefix": "v1=", "separator": ","}}
var StripeRule = Rule{
	Name: "stripe",
	ID:   "/id",
	Signature: SignatureRule{
		Header:    "Stripe-Signature",
		Signed:    "{timestamp}.{body}",
		Encoding:  "hex",
		Prefix:    "v1=",
		Separator: ",",
	},
	Timestamp: "signature:t=",
	Tolerance: 300 * time.Second,
	TTL:       96 * time.Hour,
	AckBudget: 2 * time.Second,
}
