package platform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Rule describes a webhook source without code: where the id of a delivery
// is, how the sender signs it, which timestamp it signs and how far from now
// that may be, and how long to remember it. [NewPreset] checks a Rule and
// makes a [Preset] of it, so a gateway adds a source from a configuration
// file:
//
//	{"name": "github", "id": "header:X-GitHub-Delivery", "unsigned_id": true, "ttl": "96h",
//	 "ack_budget": "5s", "signature": {"header": "X-Hub-Signature-256", "prefix": "sha256=", "encoding": "hex"}}
//
// decodes (with encoding/json) into the Rule of [GitHub]. Durations are
// written as Go writes them ("300s", "96h"); a member that is not a field
// of the Rule is an error, so a misspelt one is not silently ignored.
//
// [GitHub] and [Stripe] are Rules; so is the symmetric (v1) scheme of
// [StandardWebhooks], whose asymmetric (v1a) scheme is a second Rule, the
// preset choosing between the two by the secret's prefix. Platforms whose
// deliveries are encrypted (Feishu), batched (LINE, Meta, Matrix), or whose
// key is built from several members (OneBot) need code: their presets are
// written in Go.
type Rule struct {
	// Name is the preset's Name: the channel of its keys, such as "github".
	// It must be a valid key channel.
	Name string `json:"name"`

	// ID is where the message id is: "header:" and a header's name, such as
	// "header:X-GitHub-Delivery", or a JSON Pointer (RFC 6901) into the body,
	// an object, such as "/id" or "/data/object/id". The id must be a
	// non-empty string or a non-zero integer, as for every preset. A header
	// must be signed ({id} in Signature.Signed) unless UnsignedID says
	// otherwise.
	ID string `json:"id"`

	// Signature says how the sender signs a delivery.
	Signature SignatureRule `json:"signature"`

	// Timestamp, when the sender signs one, is where its Unix time (in
	// seconds, or in milliseconds with 13 digits) is: "header:" and a
	// header's name, such as "header:webhook-timestamp", or "signature:" and
	// the prefix of the entry of the signature header that holds it, such as
	// "signature:t=" for Stripe's "t=1492774577,v1=…". A signed timestamp
	// must be part of Signature.Signed ({timestamp}): one that is not signed
	// proves nothing.
	Timestamp string `json:"timestamp,omitempty"`

	// UnsignedID accepts an ID that is a header the signature does not
	// cover (Signature.Signed without {id}). A Rule refuses one otherwise:
	// whoever captured one delivery could post it again under any new id,
	// each copy a new message that runs. Set it only for a sender that signs
	// no id, such as GitHub (X-GitHub-Delivery) or Shopify
	// (X-Shopify-Event-Id), whose deliveries only TLS then keeps from being
	// replayed; it is an error with a signed id, or an id in the body, which
	// the signature of {body} covers.
	UnsignedID bool `json:"unsigned_id,omitempty"`

	// Tolerance is how far from now a signed timestamp may be: a delivery
	// outside it is refused as a replay. Zero means the TTL. It must not
	// exceed the TTL: a replay older than the TTL would no longer be found a
	// duplicate.
	Tolerance time.Duration `json:"tolerance,omitempty"`

	// TTL is the preset's TTL, longer than the sender redelivers. Zero means
	// [dedupe.DefaultTTL].
	TTL time.Duration `json:"ttl,omitempty"`

	// AckBudget is the preset's AckBudget: below the time the sender waits
	// for an answer. Zero: copies do not wait.
	AckBudget time.Duration `json:"ack_budget,omitempty"`
}

// SignatureRule says how a sender signs its deliveries: the signed content,
// the algorithm and the secret, and how the signatures are written in their
// header.
type SignatureRule struct {
	// Header is the header that holds the signatures, such as
	// "X-Hub-Signature-256" or "webhook-signature".
	Header string `json:"header"`

	// Algorithm is "hmac-sha256" (the default) or "ed25519", whose secret is
	// the sender's public key.
	Algorithm string `json:"algorithm,omitempty"`

	// Signed is the template of the signed content: text with the
	// placeholders {body} (the raw body, required), {timestamp} (the signed
	// timestamp as sent, required with Rule.Timestamp) and {id} (the id, when
	// Rule.ID is a header), such as "{id}.{timestamp}.{body}". Other braces
	// are an error. Empty means "{body}".
	Signed string `json:"signed,omitempty"`

	// Encoding is how a signature is written: "hex" (either case) or
	// "base64" (standard, padded).
	Encoding string `json:"encoding"`

	// Prefix is written before each signature, such as "sha256=", "v1," or
	// "v1=". Entries of the header with another prefix (another scheme, a
	// timestamp) are skipped.
	Prefix string `json:"prefix,omitempty"`

	// Separator, when set (" " or ","), separates several entries in the
	// header: the signatures of the secrets a sender rotates between, and
	// other entries. A delivery passes when one signature with the Prefix
	// matches; more than [MaxSignatures] such signatures are refused.
	// Spaces around an entry are ignored.
	Separator string `json:"separator,omitempty"`

	// SecretEncoding is how the secret given to [Preset.WithSecret] is
	// written: "text" (the default: its bytes are the key), "base64" or
	// "hex".
	SecretEncoding string `json:"secret_encoding,omitempty"`

	// SecretPrefix is removed from the secret, when it has it, before it is
	// decoded: "whsec_" for Standard Webhooks.
	SecretPrefix string `json:"secret_prefix,omitempty"`
}

// MaxSignatures is how many signatures with its prefix a delivery to a
// [Rule]'s preset may carry: a sender that rotates secrets sends two or
// three, and checking thousands (each an Ed25519 verification) would let a
// forger spend the receiver's CPU.
const MaxSignatures = 8

// MinSecretSize is the fewest bytes an HMAC key of a [Rule]'s preset may
// have (after SecretEncoding and SecretPrefix): 128 bits. A shorter one is
// guessed by trying keys (a 1-byte secret falls in at most 256 tries), and
// the preset given it refuses every delivery. An Ed25519 public key is 32
// bytes.
const MinSecretSize = 16

// ErrInvalidRule reports a [Rule] that [NewPreset] cannot make a preset of;
// the error says which field is wrong and why.
var ErrInvalidRule = errors.New("dedupe: platform: invalid rule")

// NewPreset makes a [Preset] of r after checking it: every field must be
// usable as written (a header name, a JSON Pointer, a known algorithm and
// encoding, a template whose placeholders r provides and that signs the
// timestamp and, unless r.UnsignedID, an id header, a tolerance within the
// TTL), or NewPreset returns an error wrapping [ErrInvalidRule] that names
// the field. The preset, like every preset, authenticates nothing until it
// is given its secret with [Preset.WithSecret]; a secret that does not
// decode as r.Signature.SecretEncoding says, or an HMAC key shorter than
// [MinSecretSize] bytes, makes it refuse every delivery
// ([Preset.CheckSecret] says why).
func NewPreset(r Rule) (Preset, error) {
	c, err := compileRule(r)
	if err != nil {
		return Preset{}, err
	}
	return c.preset(), nil
}

// ruleJSON is a Rule as JSON writes it: durations as strings.
type ruleJSON struct {
	Name       string          `json:"name"`
	ID         string          `json:"id"`
	UnsignedID bool            `json:"unsigned_id,omitempty"`
	Signature  SignatureRule   `json:"signature"`
	Timestamp  string          `json:"timestamp,omitempty"`
	Tolerance  json.RawMessage `json:"tolerance,omitempty"`
	TTL        json.RawMessage `json:"ttl,omitempty"`
	AckBudget  json.RawMessage `json:"ack_budget,omitempty"`
}

// UnmarshalJSON decodes a Rule from JSON: durations as strings that
// [time.ParseDuration] reads, such as "300s", and no member that is not a
// field of the Rule.
func (r *Rule) UnmarshalJSON(data []byte) error {
	var v ruleJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRule, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: more than one JSON value", ErrInvalidRule)
	}
	out := Rule{Name: v.Name, ID: v.ID, Signature: v.Signature, Timestamp: v.Timestamp, UnsignedID: v.UnsignedID}
	for _, d := range []struct {
		name string
		raw  json.RawMessage
		to   *time.Duration
	}{{"tolerance", v.Tolerance, &out.Tolerance}, {"ttl", v.TTL, &out.TTL}, {"ack_budget", v.AckBudget, &out.AckBudget}} {
		if d.raw == nil || string(d.raw) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(d.raw, &s); err != nil {
			return fmt.Errorf("%w: %s is not a duration string such as \"300s\"", ErrInvalidRule, d.name)
		}
		t, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidRule, d.name, err)
		}
		*d.to = t
	}
	*r = out
	return nil
}

// MarshalJSON encodes a Rule as [Rule.UnmarshalJSON] decodes it: durations
// as strings such as "5m0s", zero durations left out.
func (r Rule) MarshalJSON() ([]byte, error) {
	dur := func(d time.Duration) json.RawMessage {
		if d == 0 {
			return nil
		}
		return json.RawMessage(`"` + d.String() + `"`)
	}
	return json.Marshal(ruleJSON{r.Name, r.ID, r.UnsignedID, r.Signature, r.Timestamp, dur(r.Tolerance), dur(r.TTL), dur(r.AckBudget)})
}

// ruleError returns an error wrapping ErrInvalidRule about field of rule name.
func ruleError(name, field, why string, args ...any) error {
	return fmt.Errorf("%w %q: %s %s", ErrInvalidRule, name, field, fmt.Sprintf(why, args...))
}

// headerSource returns the header name of a "header:Name" source, or "".
func headerSource(src string) string {
	h, ok := strings.CutPrefix(src, "header:")
	if !ok {
		return ""
	}
	return h
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// ruleMessageID returns the MessageID func of an id source.
func ruleMessageID(name, header string, ptr pointer) func([]byte, http.Header) (string, error) {
	if header != "" {
		return func(_ []byte, h http.Header) (string, error) {
			if len(h.Values(header)) > 1 {
				return "", fmt.Errorf("%w: %s request has %s twice", dedupe.ErrInvalidKey, name, header)
			}
			id := h.Get(header)
			if id == "" {
				return "", fmt.Errorf("%w: %s request has no %s", dedupe.ErrNoMessageID, name, header)
			}
			return id, nil
		}
	}
	return func(body []byte, _ http.Header) (string, error) { return ptr.id(name, body) }
}
