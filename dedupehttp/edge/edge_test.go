package edge_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/dedupehttp/edge"
)

var (
	proxies  = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	telegram = "149.154.167.99"
)

func loopbackRange() []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} }

// request returns a request from peer with the given header lines.
func request(peer string, header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hook", nil)
	r.RemoteAddr = peer
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	return r
}

// TestClient walks forwarded headers from the right, believing only what
// trusted proxies wrote, and refuses what it cannot read.
func TestClient(t *testing.T) {
	xff, fwd := "X-Forwarded-For", "Forwarded"
	for _, tc := range []struct {
		name   string
		header string // Sources.Header
		r      *http.Request
		want   string // "" when the client cannot be told
	}{
		{"direct peer", "", request("149.154.167.99:443"), telegram},
		{"untrusted peer: header ignored", "", request("203.0.113.9:443", xff, telegram), "203.0.113.9"},
		{"trusted proxy", "", request("10.1.2.3:80", xff, telegram), telegram},
		{"trusted proxy, no header", "", request("10.1.2.3:80"), "10.1.2.3"},
		{"forged left entry ignored", "", request("10.1.2.3:80", xff, "149.154.160.1, 203.0.113.9"), "203.0.113.9"},
		{"chain of trusted proxies", "", request("10.1.2.3:80", xff, "203.0.113.9, "+telegram+", 10.9.9.9"), telegram},
		{"header lines joined", "", request("10.1.2.3:80", xff, "203.0.113.9", xff, telegram+" ,10.0.0.7"), telegram},
		{"all hops trusted", "", request("10.1.2.3:80", xff, "10.0.0.1, 10.0.0.2"), "10.0.0.1"},
		{"empty elements skipped", "", request("10.1.2.3:80", xff, " , "+telegram+",,"), telegram},
		{"entry with port", "", request("10.1.2.3:80", xff, telegram+":5555"), telegram},
		{"IPv6 entry", "", request("10.1.2.3:80", xff, "2001:db8::1"), "2001:db8::1"},
		{"bracketed IPv6 entry with port", "", request("10.1.2.3:80", xff, "[2001:db8::1]:443"), "2001:db8::1"},
		{"IPv4-mapped entry", "", request("10.1.2.3:80", xff, "::ffff:"+telegram), telegram},
		{"IPv6 peer", "", request("[fd00::5]:80", xff, telegram), telegram},
		{"IPv4-mapped peer", "", request("[::ffff:10.1.2.3]:80", xff, telegram), telegram},
		{"garbage at the right", "", request("10.1.2.3:80", xff, telegram+", garbage"), ""},
		{"garbage left of the client ignored", "", request("10.1.2.3:80", xff, "garbage, "+telegram), telegram},
		{"garbage after trusted hop", "", request("10.1.2.3:80", xff, "garbage, 10.0.0.1"), ""},
		{"too many hops", "", request("10.1.2.3:80", xff, strings.Repeat("10.0.0.1,", edge.MaxHops)+telegram), ""},
		{"peer not an address", "", request("@", xff, telegram), ""},
		{"peer with zone", "", request("[fe80::1%eth0]:80"), "fe80::1%eth0"},
		{"custom header", "X-Real-IP", request("10.1.2.3:80", "X-Real-IP", telegram, xff, "203.0.113.9"), telegram},
		{"X-Forwarded-For by default, Forwarded ignored", "", request("10.1.2.3:80", xff, telegram, fwd, "for=203.0.113.9"), telegram},

		{"Forwarded", fwd, request("10.1.2.3:80", fwd, "for="+telegram), telegram},
		{"Forwarded ignores X-Forwarded-For", fwd, request("10.1.2.3:80", fwd, "for="+telegram, xff, "203.0.113.9"), telegram},
		{"Forwarded, several pairs", fwd, request("10.1.2.3:80", fwd, `for=203.0.113.9;proto=https, For="149.154.167.99:443";by=10.0.0.1;host=example.com`), telegram},
		{"Forwarded, quoted IPv6", fwd, request("10.1.2.3:80", fwd, `for="[2001:db8:cafe::17]:4711"`), "2001:db8:cafe::17"},
		{"Forwarded, trusted hop skipped", fwd, request("10.1.2.3:80", fwd, `for=203.0.113.9, for=149.154.167.99, for="[fd00::1]"`), telegram},
		{"Forwarded, quoted comma", fwd, request("10.1.2.3:80", fwd, `for=203.0.113.9;x="a,b", for=`+telegram), telegram},
		{"Forwarded, escaped quote", fwd, request("10.1.2.3:80", fwd, `for="\"", for=`+telegram), telegram},
		{"Forwarded, unknown", fwd, request("10.1.2.3:80", fwd, "for=unknown"), ""},
		{"Forwarded, obfuscated", fwd, request("10.1.2.3:80", fwd, "for=_hidden"), ""},
		{"Forwarded, obfuscated port", fwd, request("10.1.2.3:80", fwd, `for="149.154.167.99:_p"`), ""},
		{"Forwarded, no for", fwd, request("10.1.2.3:80", fwd, "proto=https"), ""},
		{"Forwarded, two fors", fwd, request("10.1.2.3:80", fwd, "for=203.0.113.9;for="+telegram), ""},
		{"Forwarded, unquoted port", fwd, request("10.1.2.3:80", fwd, "for=149.154.167.99:443"), ""},
		{"Forwarded, unterminated quote", fwd, request("10.1.2.3:80", fwd, `for="149.154.167.99`), ""},
		{"Forwarded, syntax error on the left", fwd, request("10.1.2.3:80", fwd, `for=a b, for=`+telegram), ""},
		{"Forwarded, empty elements", fwd, request("10.1.2.3:80", fwd, ", ;, for="+telegram+",,"), telegram},
		{"Forwarded, too many hops", fwd, request("10.1.2.3:80", fwd, strings.Repeat("for=10.0.0.1,", edge.MaxHops)+"for="+telegram), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := edge.Sources{TrustedProxies: proxies, Header: tc.header}
			got, ok := s.Client(tc.r)
			if tc.want == "" {
				assert.False(t, ok, "got %v", got)
				assert.False(t, edge.Sources{Allow: []netip.Prefix{netip.MustParsePrefix("::/0"), netip.MustParsePrefix("0.0.0.0/0")}, TrustedProxies: proxies, Header: tc.header}.Allows(tc.r))
				return
			}
			assert.True(t, ok)
			assert.Equal(t, netip.MustParseAddr(tc.want), got)
		})
	}
}

// TestAllows judges the client address against the allowed ranges.
func TestAllows(t *testing.T) {
	tg := edge.Sources{Allow: edge.TelegramRanges(), TrustedProxies: proxies}
	for _, tc := range []struct {
		peer string
		xff  string
		want bool
	}{
		{"149.154.160.1:443", "", true},
		{"149.154.175.255:443", "", true},
		{"149.154.176.0:443", "", false},
		{"91.108.4.1:443", "", true},
		{"91.108.7.255:443", "", true},
		{"91.108.8.0:443", "", false},
		{"[::ffff:91.108.4.1]:443", "", true},
		{"203.0.113.9:443", "", false},
		{"10.1.2.3:80", "91.108.5.5", true},
		{"10.1.2.3:80", "", false}, // the proxy itself
		{"203.0.113.9:443", "91.108.5.5", false},
	} {
		r := request(tc.peer, "X-Forwarded-For", tc.xff)
		assert.Equal(t, tc.want, tg.Allows(r), "peer %s, X-Forwarded-For %q", tc.peer, tc.xff)
	}
	assert.False(t, edge.Sources{}.Allows(request("149.154.160.1:443")), "the zero Sources allows nothing")
	a, b := edge.TelegramRanges(), edge.TelegramRanges()
	a[0] = netip.Prefix{}
	assert.True(t, b[0].IsValid(), "each call returns its own slice")
}

// FuzzClient reads arbitrary peers and headers: it never panics, and never
// believes a header that a peer other than a trusted proxy sent.
func FuzzClient(f *testing.F) {
	for _, seed := range []string{
		"149.154.167.99", "a, b, c", "[::1]:80, ::ffff:1.2.3.4", "for=1.2.3.4", `for="[2001:db8::1]:80";proto=https`,
		`for="\`, `for="a\"b", for=_x`, ";;,,", "for=unknown, for=1.2.3.4", strings.Repeat("1.1.1.1,", 40),
		"fe80::1%eth0", "\x00\xff", `FOR="1.2.3.4"`, "for=1.2.3.4;for=5.6.7.8",
	} {
		f.Add("10.1.2.3:80", seed, seed)
		f.Add("[fd00::1]:80", seed, seed)
	}
	f.Fuzz(func(t *testing.T, peer, xff, fwd string) {
		r := request(peer, "X-Forwarded-For", xff, "Forwarded", fwd)
		peerAddr, peerOK := edge.Sources{}.Client(r)
		for _, header := range []string{"", "Forwarded"} {
			got, ok := (edge.Sources{Header: header}).Client(r)
			require.Equal(t, peerOK, ok, "no trusted proxy: got %v, want the peer %v", got, peerAddr)
			require.Equal(t, peerAddr, got, "no trusted proxy: want the peer")
			s := edge.Sources{TrustedProxies: proxies, Header: header}
			got, ok = s.Client(r)
			trusted := peerOK && (proxies[0].Contains(peerAddr) || proxies[1].Contains(peerAddr))
			if !trusted {
				require.Equal(t, peerOK, ok, "untrusted peer %v: judged by %v", peerAddr, got)
				require.Equal(t, peerAddr, got, "untrusted peer %v: judged by another address", peerAddr)
			}
			require.False(t, ok && !got.IsValid(), "ok with an invalid address")
		}
	})
}
