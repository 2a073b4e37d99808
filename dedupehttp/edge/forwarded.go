package edge

import (
	"net/netip"
	"strings"
)

// parseNode returns the address of a node as proxies write it: an IPv4 or
// IPv6 address, with or without a port ("192.0.2.1:80", "[2001:db8::1]:80",
// "[2001:db8::1]"), unmapped. It returns the zero Addr for anything else
// ("unknown", an obfuscated node, garbage).
func parseNode(s string) netip.Addr {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap()
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() {
			return a.Unmap()
		}
	}
	return netip.Addr{}
}

// addressList parses the values of an X-Forwarded-For-like header: addresses
// separated by commas, empty elements skipped. It fails beyond MaxHops
// entries.
func addressList(values []string) ([]netip.Addr, bool) {
	var hops []netip.Addr
	for _, v := range values {
		for e := range strings.SplitSeq(v, ",") {
			e = strings.Trim(e, " \t")
			if e == "" {
				continue
			}
			if len(hops) == MaxHops {
				return nil, false
			}
			hops = append(hops, parseNode(e))
		}
	}
	return hops, true
}

// forwardedFor parses the values of RFC 7239 Forwarded headers and returns
// the for= node of each element. An element without one, or with two, is
// the zero Addr; a syntax error anywhere, or more than MaxHops elements,
// fails.
func forwardedFor(values []string) ([]netip.Addr, bool) {
	var hops []netip.Addr
	for _, v := range values {
		p := &forwardedParser{s: v}
		for {
			node, ok, more := p.element()
			if !ok || (node != nil && len(hops) == MaxHops) {
				return nil, false
			}
			if node != nil {
				hops = append(hops, *node)
			}
			if !more {
				break
			}
		}
	}
	return hops, true
}

// forwardedParser reads one Forwarded header value:
//
//	Forwarded         = 1#forwarded-element
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
type forwardedParser struct {
	s string
	i int
}

// element reads one element and the comma after it. node is nil for an
// empty element; more tells whether another element follows.
func (p *forwardedParser) element() (node *netip.Addr, ok, more bool) {
	var addr netip.Addr
	fors, pairs := 0, 0
	for {
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] != ';' && p.s[p.i] != ',' {
			name, value, ok := p.pair()
			if !ok {
				return nil, false, false
			}
			pairs++
			if strings.EqualFold(name, "for") {
				fors++
				addr = parseNode(value)
			}
			p.skipSpace()
		}
		if p.i == len(p.s) || p.s[p.i] == ',' {
			break
		}
		if p.s[p.i] != ';' {
			return nil, false, false
		}
		p.i++
	}
	more = p.i < len(p.s)
	p.i++ // the comma, if any
	switch {
	case pairs == 0:
		return nil, true, more
	case fors != 1:
		return &netip.Addr{}, true, more
	}
	return &addr, true, more
}

// pair reads token "=" value.
func (p *forwardedParser) pair() (name, value string, ok bool) {
	name = p.token()
	if name == "" || p.i == len(p.s) || p.s[p.i] != '=' {
		return "", "", false
	}
	p.i++
	if p.i < len(p.s) && p.s[p.i] == '"' {
		value, ok = p.quoted()
		return name, value, ok
	}
	value = p.token()
	return name, value, value != ""
}

// token reads a run of tchar.
func (p *forwardedParser) token() string {
	start := p.i
	for p.i < len(p.s) && isTchar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// quoted reads a quoted-string from its opening quote, and returns it
// unquoted.
func (p *forwardedParser) quoted() (string, bool) {
	p.i++ // the opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '"':
			return b.String(), true
		case c == '\\' && p.i < len(p.s):
			c = p.s[p.i]
			p.i++
		case c < 0x20 && c != '\t', c == 0x7f:
			return "", false
		}
		b.WriteByte(c)
	}
	return "", false // unterminated
}

func (p *forwardedParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// isTchar reports whether c may appear in an RFC 9110 token.
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
