package platform

import "time"

// GitHub is the preset for GitHub webhooks (repository, organization and
// GitHub App webhooks). The key is the X-GitHub-Delivery header, the
// delivery's GUID, which a redelivery keeps: the REST API's delivery object
// calls it "Unique identifier for the event (shared with all deliveries for
// all webhooks that subscribe to this event)" and flags a redelivery beside
// it (github/rest-api-description, hook-delivery: guid, redelivery). It is
// shared by every webhook subscribed to the event, too: when a repository's
// and its organization's webhooks post to one endpoint, give each a preset
// with a Name of its own, or the second is dropped as a copy of the first.
//
// TTL 96 h: "GitHub does not automatically redeliver failed deliveries",
// and "You can redeliver webhook deliveries that occurred in the past 3
// days" (Redelivering webhooks,
// https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks;
// GitHub Enterprise Server keeps 7 days: a copy with an 8-day TTL serves
// it). A day of margin is added to the 3 days.
//
// AckBudget 5 s: "if your server is down or takes longer than 10 seconds to
// respond, GitHub will record the delivery as a failure" (Handling failed
// webhook deliveries,
// https://docs.github.com/en/webhooks/using-webhooks/handling-failed-webhook-deliveries;
// 30 seconds on GitHub Enterprise Server); half of it is left for the
// network and the answer.
//
// Secret: the webhook's secret. GitHub sends X-Hub-Signature-256, "sha256="
// and the hex HMAC-SHA256 of the body keyed with it (Validating webhook
// deliveries,
// https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries),
// which [Preset.Verify] checks in constant time; the SHA-1 X-Hub-Signature,
// kept "for compatibility with existing integrations", is not accepted.
// GitHub signs no timestamp, and the signature does not cover
// X-GitHub-Delivery: a captured delivery can be replayed, and under another
// X-GitHub-Delivery it is not found a copy. Only TLS keeps deliveries from
// being captured; a handler for which a replay matters checks the body's own
// ids (a push's after, a pull request's updated_at).
//
// The preset is the [Rule] [GitHubRule].
var GitHub = mustPreset(GitHubRule)

// GitHubRule is the [Rule] of the [GitHub] preset, as its JSON writes it:
//
//	{"name": "github", "id": "header:X-GitHub-Delivery", "unsigned_id": true, "ttl": "96h0m0s",
//	 "ack_budget": "5s", "signature": {"header": "X-Hub-Signature-256", "encoding": "hex", "prefix": "sha256="}}
//
// UnsignedID is set: GitHub signs the body alone, and X-GitHub-Delivery is
// not in it (see [GitHub]).
var GitHubRule = Rule{
	Name:       "github",
	ID:         "header:X-GitHub-Delivery",
	UnsignedID: true,
	Signature:  SignatureRule{Header: "X-Hub-Signature-256", Encoding: "hex", Prefix: "sha256="},
	TTL:        96 * time.Hour,
	AckBudget:  5 * time.Second,
}

// mustPreset is NewPreset for the rules of this package, which are checked
// by its tests.
func mustPreset(r Rule) Preset { return mustSpec(r).preset() }
