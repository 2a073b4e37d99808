package platform

import (
	"strings"
	"time"
)

// StandardWebhooks is the preset for senders that follow the Standard
// Webhooks specification (https://www.standardwebhooks.com/; the text is
// spec/standard-webhooks.md of github.com/standard-webhooks/standard-webhooks),
// OpenAI's webhooks and Svix's among them. The key is the webhook-id header:
// "a unique identifier associated with a specific event triggered, and it
// remains the same no matter how many times a webhook that has failed is
// retried", which the specification asks receivers to use "as an idempotency
// key". The channel is "webhooks"; give each sender a Name of its own (such
// as "openai") when several share a store.
//
// TTL 96 h: the specification's example retry schedule ("retry delivery
// following a retry schedule spanning multiple days, with an exponential
// backoff") makes its last attempt 75 h 35 min after the first; a day of
// margin is added. A sender with a longer schedule, or manual retries after
// it, needs a copy with a longer TTL.
//
// AckBudget 10 s: "A recommended request timeout value for webhooks is
// somewhere between 15 and 30s" (Request timeouts); the lower bound is
// assumed and 5 seconds are left for the network and the answer.
//
// Secret: the endpoint's signing secret. Each delivery carries webhook-id,
// webhook-timestamp (Unix seconds) and webhook-signature, "a space
// delimited list of signatures" so that secrets can be rotated without
// downtime; each signature signs "{webhook-id}.{webhook-timestamp}.{body}".
// Two schemes exist, told apart by the secret:
//
//   - symmetric, v1: a secret "whsec_" and the base64 of 24 to 64 random
//     bytes (the official libraries also take it without "whsec_"), and
//     signatures "v1," and the base64 of the HMAC-SHA256 keyed with those
//     bytes;
//   - asymmetric, v1a: the sender's Ed25519 public key, "whpk_" and its
//     base64, and signatures "v1a," and the base64 of the Ed25519 signature.
//     The secret key ("whsk_") stays with the sender: given it, the preset
//     refuses every delivery.
//
// [Preset.Verify] accepts a delivery when one signature of its scheme
// matches (the other scheme's, and unknown ones such as "v2,", are
// skipped), and refuses a webhook-timestamp more than 5 minutes from now,
// the tolerance of the official libraries
// (libraries/go/webhook.go, tolerance), against replays. A redelivery
// carries a new timestamp and new signatures ("Every time an attempt is
// retried the timestamp of the attempt is updated") and the same
// webhook-id, which is signed: it is found a copy by its key.
//
// Each scheme is a [Rule] ([StandardWebhooksRule], [StandardWebhooksV1aRule]);
// the preset is a few lines of code on top of them, which pick the Rule by
// the secret's prefix. That choice is all a Rule cannot say: a Rule has one
// algorithm and one key.
var StandardWebhooks = standardWebhooks()

// StandardWebhooksRule is the [Rule] of the symmetric scheme (v1) of
// [StandardWebhooks]: an endpoint whose sender signs with "whsec_" secrets
// may use its preset alone.
var StandardWebhooksRule = Rule{
	Name: "webhooks",
	ID:   "header:webhook-id",
	Signature: SignatureRule{
		Header:         "webhook-signature",
		Signed:         "{id}.{timestamp}.{body}",
		Encoding:       "base64",
		Prefix:         "v1,",
		Separator:      " ",
		SecretEncoding: "base64",
		SecretPrefix:   "whsec_",
	},
	Timestamp: "header:webhook-timestamp",
	Tolerance: 5 * time.Minute,
	TTL:       96 * time.Hour,
	AckBudget: 10 * time.Second,
}

// StandardWebhooksV1aRule is the [Rule] of the asymmetric scheme (v1a) of
// [StandardWebhooks]: [StandardWebhooksRule] with the algorithm ed25519,
// the prefix "v1a," and "whpk_" public keys.
var StandardWebhooksV1aRule = standardWebhooksV1a()

func standardWebhooksV1a() Rule {
	r := StandardWebhooksRule
	r.Signature.Algorithm, r.Signature.Prefix, r.Signature.SecretPrefix = "ed25519", "v1a,", "whpk_"
	return r
}

func standardWebhooks() Preset {
	sym, asym := mustSpec(StandardWebhooksRule), mustSpec(StandardWebhooksV1aRule)
	p := sym.preset()
	p.newVerifier = func(secret string) (verifier, error) {
		switch {
		case strings.HasPrefix(secret, "whpk_"):
			return asym.newVerifier(secret)
		case strings.HasPrefix(secret, "whsk_"):
			return nil, unauthenticated("webhooks", `secret is the sender's Ed25519 secret key ("whsk_"): give the public key ("whpk_")`)
		}
		return sym.newVerifier(secret)
	}
	return p
}

// mustSpec is compileRule for the rules of this package, which are checked
// by its tests.
func mustSpec(r Rule) *ruleSpec {
	s, err := compileRule(r)
	if err != nil {
		panic(err)
	}
	return s
}
