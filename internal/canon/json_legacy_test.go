package canon

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// This file keeps the JSON parser canon had before it was built on
// internal/jsonscan, unchanged but for its names, as the oracle of
// FuzzJSONTextAsLegacy: the canonical form is the input of content
// signatures, so the new parser must write the same bytes for every input.

// legacyPool holds parsers with their working buffers, because the recursive
// legacyParser keeps the compiler from placing them on the stack.
var legacyPool = sync.Pool{New: func() any { return &legacyParser{scratch: make([]byte, 0, 512)} }}

// legacyAppendJSONText parses s as one JSON value (RFC 8259, surrounding whitespace
// allowed) and appends its canonical form. ok is false if s is not valid JSON
// or nests deeper than [MaxDepth].
func legacyAppendJSONText(buf []byte, s string) (_ []byte, ok bool) {
	p := legacyPool.Get().(*legacyParser)
	p.s, p.i = s, 0
	buf, ok = p.parse(buf)
	p.s = ""
	if cap(p.scratch) <= maxPooled && cap(p.esc) <= maxPooled {
		legacyPool.Put(p)
	}
	return buf, ok
}

// legacyParser is a strict JSON legacyParser that writes the canonical form as it goes.
type legacyParser struct {
	s       string
	i       int
	scratch []byte // for reordering object members
	esc     []byte // a decoded string that held escapes
}

// parse parses the whole input as one value and appends its canonical form.
func (p *legacyParser) parse(buf []byte) (_ []byte, ok bool) {
	buf, ok = p.value(buf, 0)
	if !ok {
		return buf, false
	}
	p.skipSpace()
	return buf, p.i == len(p.s)
}

func (p *legacyParser) skipSpace() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *legacyParser) literal(lit string) bool {
	if strings.HasPrefix(p.s[p.i:], lit) {
		p.i += len(lit)
		return true
	}
	return false
}

func (p *legacyParser) value(buf []byte, depth int) ([]byte, bool) {
	if depth > MaxDepth {
		return buf, false
	}
	p.skipSpace()
	if p.i >= len(p.s) {
		return buf, false
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(buf, depth)
	case c == '[':
		return p.array(buf, depth)
	case c == '"':
		s, esc, ok := p.str()
		if !ok {
			return buf, false
		}
		if esc != nil {
			return appendStringBytes(buf, esc), true
		}
		return appendString(buf, s), true
	case c == 't':
		return append(buf, 't'), p.literal("true")
	case c == 'f':
		return append(buf, 'f'), p.literal("false")
	case c == 'n':
		return append(buf, 'n'), p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		text, ok := p.number()
		if !ok {
			return buf, false
		}
		var tmp [32]byte
		return appendNumberValue(buf, appendNumber(tmp[:0], text)), true
	}
	return buf, false
}

func (p *legacyParser) array(buf []byte, depth int) ([]byte, bool) {
	p.i++ // '['
	buf = append(buf, '[')
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return append(buf, ']'), true
	}
	for {
		var ok bool
		if buf, ok = p.value(buf, depth+1); !ok {
			return buf, false
		}
		p.skipSpace()
		if p.i >= len(p.s) {
			return buf, false
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return append(buf, ']'), true
		default:
			return buf, false
		}
	}
}

func (p *legacyParser) object(buf []byte, depth int) ([]byte, bool) {
	p.i++ // '{'
	start := len(buf)
	var stack [8]member
	mems := stack[:0]
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return append(buf, '{', '}'), true
	}
	for {
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return buf, false
		}
		key, esc, ok := p.str()
		if !ok {
			return buf, false
		}
		if esc != nil {
			key = string(esc)
		}
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return buf, false
		}
		p.i++
		lo := len(buf)
		if buf, ok = p.value(buf, depth+1); !ok {
			return buf, false
		}
		mems = append(mems, member{key: key, lo: lo, hi: len(buf)})
		p.skipSpace()
		if p.i >= len(p.s) {
			return buf, false
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			buf, p.scratch = appendObject(buf, start, mems, p.scratch)
			return buf, true
		default:
			return buf, false
		}
	}
}

// number scans a JSON number at p.i and returns its text.
func (p *legacyParser) number() (string, bool) {
	n, ok := legacyScanNumber(p.s[p.i:])
	if !ok {
		return "", false
	}
	p.i += n
	return p.s[p.i-n : p.i], true
}

// legacyScanNumber returns the length of the JSON number at the start of s.
func legacyScanNumber(s string) (int, bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = legacySkipDigits(s, i)
	default:
		return 0, false
	}
	if i < len(s) && s[i] == '.' {
		d := i + 1
		if i = legacySkipDigits(s, d); i == d {
			return 0, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		if i = legacySkipDigits(s, d); i == d {
			return 0, false
		}
	}
	return i, true
}

func legacySkipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// str scans a JSON string at p.i. A string without escapes is returned as a
// substring of the input, without allocating; one with escapes is decoded into
// esc, which is valid until the next call. Lone surrogates decode to U+FFFD, as
// in encoding/json.
func (p *legacyParser) str() (s string, esc []byte, ok bool) {
	in := p.s
	i := p.i + 1
	start := i
	for i < len(in) && in[i] != '"' && in[i] != '\\' {
		if in[i] < 0x20 {
			return "", nil, false
		}
		i++
	}
	if i >= len(in) {
		return "", nil, false
	}
	if in[i] == '"' {
		p.i = i + 1
		return in[start:i], nil, true
	}
	out := append(p.esc[:0], in[start:i]...)
	defer func() { p.esc = out[:0] }()
	for i < len(in) {
		c := in[i]
		switch {
		case c == '"':
			p.i = i + 1
			return "", out, true
		case c < 0x20:
			return "", nil, false
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if out, i, ok = legacyAppendEscape(out, in, i); !ok {
			return "", nil, false
		}
	}
	return "", nil, false
}

// legacyAppendEscape decodes the escape sequence at in[i], which is '\\', appends
// it to out, and returns the index after it.
func legacyAppendEscape(out []byte, in string, i int) (_ []byte, next int, ok bool) {
	if i+1 >= len(in) {
		return out, i, false
	}
	switch e := in[i+1]; e {
	case '"', '\\', '/':
		return append(out, e), i + 2, true
	case 'b':
		return append(out, '\b'), i + 2, true
	case 'f':
		return append(out, '\f'), i + 2, true
	case 'n':
		return append(out, '\n'), i + 2, true
	case 'r':
		return append(out, '\r'), i + 2, true
	case 't':
		return append(out, '\t'), i + 2, true
	case 'u':
		r, ok := legacyHex4(in, i+2)
		if !ok {
			return out, i, false
		}
		i += 6
		if r >= 0xD800 && r < 0xDC00 { // high surrogate: try to pair it
			if lo, ok := legacyHex4(in, i+2); ok && i+1 < len(in) && in[i] == '\\' && in[i+1] == 'u' && lo >= 0xDC00 && lo < 0xE000 {
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				i += 6
			} else {
				r = 0xFFFD
			}
		} else if r >= 0xDC00 && r < 0xE000 {
			r = 0xFFFD
		}
		return utf8.AppendRune(out, r), i, true
	}
	return out, i, false
}

// legacyHex4 decodes the four hex digits at s[i:i+4].
func legacyHex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		d, ok := hexVal(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}
