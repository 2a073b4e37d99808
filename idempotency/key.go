package idempotency

import (
	"errors"
	"fmt"
	"strings"
)

// ErrMalformedKey reports an Idempotency-Key field that is not a Structured
// Field Item whose value is a non-empty String of at most [MaxKeyLen]
// characters.
var ErrMalformedKey = errors.New("idempotency: malformed Idempotency-Key")

// MaxKeyLen is the longest key accepted, in characters: 255, as Stripe's.
// The draft sets no bound; a UUID is 36.
const MaxKeyLen = 255

// ParseKey parses the value of an Idempotency-Key field as the draft asks
// (draft-ietf-httpapi-idempotency-key-header-07, section 2.1): an Item
// Structured Header (RFC 9651, section 4.2) whose bare item is a String
// (section 3.3.3), as in
//
//	Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"
//
// It returns the string unescaped. Leading and trailing spaces are dropped;
// parameters after the string are checked and ignored. Several field lines
// joined with commas are not one Item and are refused. An empty string, one
// over [MaxKeyLen] characters, a Token or any other bare item (an unquoted
// UUID is a Token or starts as an Integer) wraps [ErrMalformedKey].
func ParseKey(field string) (string, error) {
	p := sfParser{s: strings.Trim(field, " ")}
	if p.peek() != '"' {
		return "", fmt.Errorf("%w: not a String (a quoted string, as \"8e03978e-40d5\")", ErrMalformedKey)
	}
	key := p.str()
	p.params()
	switch {
	case p.err != nil:
		return "", p.err
	case p.i != len(p.s):
		return "", fmt.Errorf("%w: %q after the Item", ErrMalformedKey, p.s[p.i:])
	case key == "":
		return "", fmt.Errorf("%w: empty", ErrMalformedKey)
	case len(key) > MaxKeyLen:
		return "", fmt.Errorf("%w: %d characters, over %d", ErrMalformedKey, len(key), MaxKeyLen)
	}
	return key, nil
}

// parseBareKey accepts, besides what ParseKey does, an unquoted key of
// visible ASCII without quotes, commas or semicolons, as Stripe's clients send.
func parseBareKey(field string) (string, error) {
	s := strings.Trim(field, " ")
	if strings.HasPrefix(s, `"`) {
		return ParseKey(field)
	}
	if s == "" || len(s) > MaxKeyLen || strings.ContainsAny(s, `",;\`) {
		return "", fmt.Errorf("%w: not a String nor a bare key", ErrMalformedKey)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return "", fmt.Errorf("%w: byte %#x", ErrMalformedKey, s[i])
		}
	}
	return s, nil
}

// sfParser parses the parts of an RFC 9651 Item that ParseKey needs: a
// String and the Parameters after it, whose values may be any bare item.
// The first error stops it.
type sfParser struct {
	s   string
	i   int
	err error
}

func (p *sfParser) peek() byte {
	if p.err != nil || p.i >= len(p.s) {
		return 0
	}
	return p.s[p.i]
}

func (p *sfParser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformedKey}, args...)...)
	}
}

// str parses a String (RFC 9651, section 4.2.5).
func (p *sfParser) str() string {
	p.i++ // the opening quote
	var b strings.Builder
	for p.err == nil {
		if p.i >= len(p.s) {
			p.fail("unterminated String")
			break
		}
		c := p.s[p.i]
		p.i++
		switch {
		case c == '"':
			return b.String()
		case c == '\\':
			if p.i >= len(p.s) || p.s[p.i] != '"' && p.s[p.i] != '\\' {
				p.fail("bad escape in String")
				break
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case c < 0x20 || c > 0x7e:
			p.fail("byte %#x in String", c)
		default:
			b.WriteByte(c)
		}
	}
	return ""
}

// params parses Parameters (section 4.2.3.2): *( ";" *SP key [ "=" bare-item ] ).
func (p *sfParser) params() {
	for p.peek() == ';' {
		p.i++
		for p.peek() == ' ' {
			p.i++
		}
		p.paramKey()
		if p.peek() == '=' {
			p.i++
			p.bareItem()
		}
	}
}

// paramKey parses a key (section 4.2.3.3).
func (p *sfParser) paramKey() {
	if c := p.peek(); !(c >= 'a' && c <= 'z' || c == '*') {
		p.fail("bad parameter key")
		return
	}
	for c := p.peek(); c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("_-.*", c) >= 0 && c != 0; c = p.peek() {
		p.i++
	}
}

// bareItem parses any bare item (section 4.2.3.1) as a parameter value.
func (p *sfParser) bareItem() {
	switch c := p.peek(); {
	case c == '-' || c >= '0' && c <= '9':
		p.number()
	case c == '"':
		p.str()
	case c == '*' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
		p.token()
	case c == ':':
		p.byteSeq()
	case c == '?':
		p.i++
		if c := p.peek(); c != '0' && c != '1' {
			p.fail("bad Boolean")
			return
		}
		p.i++
	case c == '@':
		p.i++
		p.number()
	case c == '%':
		p.displayString()
	default:
		p.fail("bad parameter value")
	}
}

// number parses an Integer or Decimal (section 4.2.4).
func (p *sfParser) number() {
	if p.peek() == '-' {
		p.i++
	}
	digits, frac, dot := 0, 0, false
	for c := p.peek(); c >= '0' && c <= '9' || c == '.' && !dot; c = p.peek() {
		p.i++
		switch {
		case c == '.':
			dot = true
		case dot:
			frac++
		default:
			digits++
		}
	}
	switch {
	case digits == 0:
		p.fail("bad number")
	case !dot && digits > 15, dot && (digits > 12 || frac == 0 || frac > 3):
		p.fail("bad number")
	}
}

// token parses a Token (section 4.2.6): tchar, ":" and "/" after the first.
func (p *sfParser) token() {
	p.i++
	for c := p.peek(); c != 0 && (tchar(c) || c == ':' || c == '/'); c = p.peek() {
		p.i++
	}
}

// byteSeq parses a Byte Sequence (section 4.2.7): base64 between colons.
func (p *sfParser) byteSeq() {
	p.i++
	for c := p.peek(); c != ':'; c = p.peek() {
		if c == 0 || !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			p.fail("bad Byte Sequence")
			return
		}
		p.i++
	}
	p.i++
}

// displayString parses a Display String (section 4.2.10): %"..." with
// lower-case %xx escapes.
func (p *sfParser) displayString() {
	p.i++
	if p.peek() != '"' {
		p.fail("bad Display String")
		return
	}
	for p.i++; p.err == nil; p.i++ {
		c := p.peek()
		switch {
		case p.i >= len(p.s) || c < 0x20 || c > 0x7e:
			p.fail("bad Display String")
		case c == '"':
			p.i++
			return
		case c == '%':
			if p.i+2 >= len(p.s) || !lowerHex(p.s[p.i+1]) || !lowerHex(p.s[p.i+2]) {
				p.fail("bad escape in Display String")
			}
			p.i += 2
		}
	}
}

func lowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

// tchar reports whether c is an RFC 9110 token character.
func tchar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
