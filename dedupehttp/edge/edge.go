// Package edge guards a gateway's webhook and management endpoints at its
// edge: [Sources] tells whether a request comes from the address ranges a
// platform sends from, reading the client address that the gateway's own
// proxies forward, and [RequireAuth] puts a check in front of a handler such
// as the queue status endpoint ([github.com/gatewaykit/dedupe/dedupehttp.Async.StatusHandler]).
// It uses only the standard library.
//
// # Source ranges
//
// Give the webhook middleware the filter with
// [github.com/gatewaykit/dedupe/dedupehttp.WithSourceFilter], which New,
// Middleware and NewAsync take: a request from elsewhere is answered 403
// Forbidden with X-Dedupe-Verdict "forbidden" before its body is read,
// counted in Stats.Forbidden and logged at debug level; it reaches neither
// the store nor the handler.
//
//	src := edge.Sources{
//		Allow:          edge.TelegramRanges(),
//		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, // the load balancer
//	}
//	http.Handle("POST /telegram", dedupehttp.New(d, tg, h, dedupehttp.WithSourceFilter(src.Allows)))
//
// A source filter is a second fence, not authentication: a platform's ranges
// carry the deliveries of all its customers, and anyone can point a bot of
// their own at your URL. Keep the preset's secret
// ([github.com/gatewaykit/dedupe/platform.Preset.WithSecret]); the filter
// spares the secret check, the body and the logs the rest of the internet.
//
// # The client address
//
// The address a request is judged by is its immediate peer (RemoteAddr),
// unless that peer is one of [Sources].TrustedProxies. Then the forwarded
// header ([Sources].Header: X-Forwarded-For, or the RFC 7239 Forwarded) is
// walked from the right, the end the proxies append to, skipping the
// addresses of trusted proxies: the first address that is not one is the
// client (if every entry is one, the leftmost). The entries left of the
// client were written by whoever sent the request, and are never judged.
// What the walk cannot read refuses the request, for the filter never
// guesses: an entry it reaches that is not an address (garbage, an "unknown"
// or obfuscated Forwarded node, a Forwarded element without exactly one
// for=), a Forwarded header with a syntax error anywhere, or a header of more
// than [MaxHops] entries.
//
// # Protecting the status endpoint
//
// The answers of the queue status endpoint hold no part of a message, and
// queue ids are 128 random bits, so only the platform (or whoever it told)
// knows one. To keep even the states private, mount the endpoint behind
// [RequireAuth], on its own path or port: with [BearerToken] for a service
// that calls it with a shared token,
//
//	http.Handle("GET /queue/{id}", edge.RequireAuth(a.StatusHandler(), edge.BearerToken(os.Getenv("STATUS_TOKEN"))))
//
// with [SignedURL] to hand out links that [SignURL] signed and that expire
// (say, to the user waiting on a long job),
//
//	link, err := edge.SignURL(key, "/queue/"+dedupehttp.QueueID(ctx), time.Now().Add(time.Hour))
//
// or with a verifier of your own (a session, mTLS's r.TLS.VerifiedChains,
// the source ranges of an internal network: src.Allows). Verifiers combine
// with a func literal: func(r *http.Request) bool { return a(r) || b(r) }.
package edge

import (
	"net/http"
	"net/netip"
)

// TelegramRanges returns the address ranges Telegram's Bot API sends
// webhooks from, 149.154.160.0/20 and 91.108.4.0/22, as Telegram's webhooks
// guide ("Marvin's Marvellous Guide to All Things Webhook",
// https://core.telegram.org/bots/webhooks, "The short version") lists them,
// read on 2026-12-01: "Accepts incoming POSTs from subnets 149.154.160.0/20
// and 91.108.4.0/22" (in force since July 2019, says the Bot API changelog
// of versions 4.2 to 4.4). The guide says webhooks are sent over IPv4 only,
// and that the ranges might change: check it when deliveries start being
// refused ([github.com/gatewaykit/dedupe/dedupehttp.Stats].Forbidden). (https://core.telegram.org/resources/cidr.txt lists all of
// Telegram's networks, which is wider.) Each call returns a new slice.
func TelegramRanges() []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix("149.154.160.0/20"),
		netip.MustParsePrefix("91.108.4.0/22"),
	}
}

// MaxHops is the most entries of a forwarded header that [Sources] reads: a
// request whose header holds more is refused.
const MaxHops = 32

// Sources decides which requests come from allowed address ranges. Its zero
// value allows nothing. A Sources is plain data, safe for concurrent use as
// long as nobody modifies it.
type Sources struct {
	// Allow lists the address ranges requests are accepted from. A request
	// whose client address is in none of them is refused; with Allow empty,
	// every request is. An IPv4-mapped IPv6 address is judged as its IPv4
	// address; an address with a zone (fe80::1%eth0) is in no range.
	Allow []netip.Prefix
	// TrustedProxies lists the address ranges of the gateway's own proxies
	// (load balancer, ingress, CDN). The forwarded header is read only when
	// the request's immediate peer is in one of them; empty (the default),
	// it is never read and the peer is the client.
	TrustedProxies []netip.Prefix
	// Header names the header the trusted proxies append the address of
	// their peer to: "X-Forwarded-For" (the default when empty), "Forwarded"
	// (RFC 7239, its for= parameter), or another header of comma-separated
	// addresses. Name the header your proxies write (and overwrite or append
	// to), not one a client could send past them.
	Header string
}

// Allows reports whether r comes from an address in s.Allow, as [Sources.Client]
// finds it. Its method value is the filter of
// [github.com/gatewaykit/dedupe/dedupehttp.WithSourceFilter].
func (s Sources) Allows(r *http.Request) bool {
	a, ok := s.Client(r)
	return ok && contains(s.Allow, a)
}

// Client returns the address r is judged by: its peer, or, when the peer is
// a trusted proxy, the address the proxies forward (see the package
// documentation). ok is false when the address cannot be told: a peer that
// is not an IP address (a Unix socket), or a forwarded header that cannot be
// read to its client.
func (s Sources) Client(r *http.Request) (addr netip.Addr, ok bool) {
	peer := parseNode(r.RemoteAddr)
	if !peer.IsValid() {
		return netip.Addr{}, false
	}
	if !contains(s.TrustedProxies, peer) {
		return peer, true
	}
	hops, ok := s.hops(r.Header)
	if !ok {
		return netip.Addr{}, false
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		client = hops[i]
		if !client.IsValid() {
			return netip.Addr{}, false
		}
		if !contains(s.TrustedProxies, client) {
			return client, true
		}
	}
	return client, true // every hop a trusted proxy: the leftmost sent it
}

// hops returns the addresses of the forwarded header, leftmost first; an
// entry that is not an address is the zero Addr.
func (s Sources) hops(h http.Header) ([]netip.Addr, bool) {
	switch name := http.CanonicalHeaderKey(s.Header); name {
	case "Forwarded":
		return forwardedFor(h.Values(name))
	case "":
		return addressList(h.Values("X-Forwarded-For"))
	default:
		return addressList(h.Values(name))
	}
}

// contains reports whether a is in one of ps.
func contains(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
