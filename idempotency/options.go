package idempotency

import (
	"net/http"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Defaults of the options.
const (
	DefaultTTL     = 24 * time.Hour // as Stripe: a day of client retries
	DefaultChannel = "idem"         // the dedupe channel of the keys
	DefaultMaxBody = 1 << 20        // 1 MiB of request body, read to fingerprint it
)

// An Option configures [Middleware].
type Option func(*config)

type config struct {
	optional    bool
	methods     []string
	scope       func(*http.Request) string
	fingerprint func(*http.Request, []byte) []byte
	ttl         time.Duration
	wait        time.Duration
	channel     string
	maxBody     int64
	headers     []string
	docs        string
	bare        bool
}

func newConfig(opts []Option) config {
	c := config{
		methods:     []string{http.MethodPost, http.MethodPatch},
		scope:       func(*http.Request) string { return "" },
		fingerprint: DefaultFingerprint,
		ttl:         DefaultTTL,
		channel:     DefaultChannel,
		maxBody:     DefaultMaxBody,
		docs:        DefaultDocs,
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithOptional makes the key optional: a request of a covered method without
// an Idempotency-Key passes to the handler untouched, as any other request.
// By default it is required and refused with 400 (the draft's section 2.7,
// for "a documented idempotent operation requiring this header").
func WithOptional() Option { return func(c *config) { c.optional = true } }

// WithMethods sets the methods the key applies to (default POST and PATCH,
// the draft's non-idempotent methods; PUT and DELETE are idempotent by
// RFC 9110). Other methods pass to the handler untouched, key or not. None
// keeps the default.
func WithMethods(methods ...string) Option {
	return func(c *config) {
		if len(methods) > 0 {
			c.methods = methods
		}
	}
}

// WithScope sets the function that names the caller of a request, such as
// its authenticated user or API key, so that keys are unique per caller: two
// callers sending the same key never share a response. By default there is
// no scope: keys are shared by every caller, and a caller who learns or
// guesses another's key is replayed that caller's response, or blocks it
// with a different payload. Scope gateways with more than one caller (the
// draft's Security Considerations). The scope is hashed, never stored.
func WithScope(scope func(*http.Request) string) Option {
	return func(c *config) {
		if scope != nil {
			c.scope = scope
		}
	}
}

// WithFingerprint sets the function that digests a request, whose result
// binds a key to its request (the draft's section 2.4): a request reusing a
// key with another fingerprint is refused with 422. It gets the request and
// its body, read already (the handler gets it again); what it returns is
// hashed with SHA-256. Default [DefaultFingerprint].
func WithFingerprint(f func(r *http.Request, body []byte) []byte) Option {
	return func(c *config) {
		if f != nil {
			c.fingerprint = f
		}
	}
}

// WithTTL sets how long a key is remembered after its request was first
// processed, the expiration policy the draft's section 2.3 asks a resource
// to publish (default [DefaultTTL]; zero or less keeps it). After it the key
// is new again. Stores may keep the response for less (see
// [dedupe.Store.MarkResult]); a retry is then answered that it cannot be replayed.
func WithTTL(ttl time.Duration) Option {
	return func(c *config) {
		if ttl > 0 {
			c.ttl = ttl
		}
	}
}

// WithWait makes a request whose key is in flight wait up to max for the
// first request (as [dedupe.WithWait]), and be answered with its response,
// instead of 409 at once. If the first request fails (5xx, panic), the
// waiting one runs the handler itself, after it. The default, no wait, is
// the draft's (section 2.6, "Concurrent Request"); zero keeps the setting,
// a negative max turns waiting off. The Deduper's own wait is not used.
func WithWait(max time.Duration) Option {
	return func(c *config) {
		if max != 0 {
			c.wait = max // <= 0: no wait
		}
	}
}

// WithChannel sets the dedupe channel of the keys (default [DefaultChannel]),
// so that two APIs on one store keep their keys apart. A name that is not a
// valid channel (see [dedupe.Key.Validate]) keeps the default.
func WithChannel(name string) Option {
	return func(c *config) {
		if (dedupe.Key{Channel: name, MessageID: "x"}).Validate() == nil {
			c.channel = name
		}
	}
}

// WithMaxBody sets the largest request body read to fingerprint a request
// (default [DefaultMaxBody]; zero or less keeps it); a larger one is refused
// with 413.
func WithMaxBody(n int64) Option {
	return func(c *config) {
		if n > 0 {
			c.maxBody = n
		}
	}
}

// WithHeaders sets the response headers kept and replayed with the status
// and body (default: httpreplay's list, Content-Type, Content-Encoding,
// Content-Language, Content-Disposition, Location, Cache-Control, ETag,
// Last-Modified and Vary). Set-Cookie, Date, Content-Length and the
// connection's headers are never kept.
func WithHeaders(names ...string) Option {
	return func(c *config) { c.headers = append([]string{}, names...) }
}

// WithDocs sets the URL of the documentation of the API's idempotency policy
// (its covered operations and expiry, as the draft's section 2.5 asks a
// resource to publish), from which the problem types are made (URL + "#" +
// a name such as "key-missing") and which error answers link to with
// Link: <URL>; rel="describedby", as the draft's section 2.7 shows. Default
// [DefaultDocs].
func WithDocs(url string) Option {
	return func(c *config) {
		if url != "" {
			c.docs = strings.TrimSuffix(url, "#")
		}
	}
}

// WithBareKeys also accepts a key sent without quotes
// (Idempotency-Key: 8e03978e-40d5), as Stripe's clients send it: visible
// ASCII without quotes, commas, semicolons or backslashes. The draft asks for
// a String; by default a bare key is refused with 400.
func WithBareKeys() Option { return func(c *config) { c.bare = true } }
