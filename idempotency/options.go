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
	caller      func(*http.Request) string // WithCaller's; nil: the default
	fingerprint func(*http.Request, []byte) []byte
	ttl         time.Duration
	wait        time.Duration
	channel     string
	maxBody     int64
	headers     []string
	docs        string
	bare        bool
	scoped      bool // WithScope was given
	quota       int  // WithQuota's n: 0 the default, < 0 none
	now         func() time.Time
	stats       *Stats
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
		now:         time.Now,
		stats:       new(Stats),
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
			c.scope, c.scoped = scope, true
		}
	}
}

// WithCaller sets the function that names who sends a request, for the
// quota ([WithQuota]): its keys count against one caller's share whatever
// scopes ([WithScope]) they come under. A caller is what authenticates the
// request, such as an API key or an account, where a scope may be finer
// (an API key acting for many accounts, as Stripe's Stripe-Account header
// does): a caller presenting many scopes must not take many shares, or one
// could take every other caller's room. The name is hashed, never stored.
//
// By default the caller is the request's credential: its first
// Authorization header (whatever the scheme: Bearer, Basic, a signature),
// or else the certificate of a TLS client, or else the scope. Give a caller
// function where the API authenticates otherwise (a cookie, a header of its
// own, a proxy that authenticated the client: the identity it passes on),
// and when one credential is shared by many callers. A nil function keeps
// the default.
func WithCaller(caller func(*http.Request) string) Option {
	return func(c *config) {
		if caller != nil {
			c.caller = caller
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
// ASCII without quotes, commas, semicolons or backslashes, at most
// [MaxKeyLen] bytes. A key sent bare and the same key quoted are one key. The
// draft asks for a String; by default a bare key is refused with 400, whose
// detail shows the key quoted and names this option (the package overview
// says why the default is strict).
func WithBareKeys() Option { return func(c *config) { c.bare = true } }

// WithQuota sets how many keys one caller ([WithCaller]: by default what
// authenticates the request) may hold at once, over all its scopes, a key
// being held from its first request until the TTL after its request was
// processed: a request with a new key beyond it is refused with 503
// over-quota and a Retry-After that says when the first of the caller's
// keys expires (or, when the middleware's share of the store is full, the
// first of all keys), rather than stored; retries of keys held are served.
// A request that leaves nothing in the store (a failing store answered 503
// unavailable, a key in flight in another process answered 409) gives its
// key's share back at once. A request whose handler ran keeps it, even if
// the handler failed: the key stays bound to its payload for the TTL (see
// the package overview). n == 0 keeps the default; n < 0 turns off both
// bounds below, and a bounded store may then evict keys inside their TTL.
//
// The default depends on the store. On a store that evicts marks to take new
// ones ([dedupe.Evicter]: the memory store, MaxSize marks) a key that a
// flood of other keys evicted would be new again inside its TTL, and its
// retry would run the handler a second time; so by default the middleware
// holds at most as many keys as take half the store's marks (each key takes
// two: 2,500 keys in the default 10,000 marks), and with callers told apart
// (WithScope or WithCaller) one caller at most an eighth of those (312), so
// that no one caller can take the others' room, however many scopes it
// presents. New keys beyond either are refused, never evicting a key held.
// The half leaves room for the store's shards, which fill unevenly; it
// assumes the store is the middleware's own (size a store shared with other
// work for both, and watch [dedupe.Stats].Evicted). Eight callers at their
// share fill it: size the store for the callers you serve. On a store that
// does not evict (SQLite, PostgreSQL, Redis without an eviction policy)
// there is no quota by default: n bounds each caller's keys.
//
// Keys are counted in this process's memory, by hash, about 50 bytes each:
// each instance of a gateway counts the keys it was sent. A key the store
// holds from before the process started is counted when it is sent again.
func WithQuota(n int) Option { return func(c *config) { c.quota = n } }

// WithStats makes the middleware count what it refuses on its own account
// in s (see [Stats]), which the caller reads.
func WithStats(s *Stats) Option {
	return func(c *config) {
		if s != nil {
			c.stats = s
		}
	}
}

// WithClock sets the clock of the quota's expiries and Retry-After
// ([WithQuota]) and of the Retry-After of a key in flight (default
// time.Now). Give it the store's
// clock when you inject one.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}
