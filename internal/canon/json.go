package canon

import (
	"cmp"
	"slices"
	"sync"

	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// The canonical form of a JSON value, used only as input to a digest. Every
// value is self-delimiting, so the form is injective:
//
//	null "n", true "t", false "f"
//	number "#{len}:{digits}" (by value; see appendNumber)
//	string "s{len}:{bytes}" (escapes decoded)
//	array  "[" values "]"
//	object "{" (string value)* "}" with keys sorted bytewise, the last of
//	       duplicate keys kept
//
// XML is written in the same alphabet; see [AppendXML].

// MaxDepth bounds the nesting of the payloads read, so hostile payloads cannot
// exhaust the stack: deeper text is not valid for [AppendJSONText] and
// [AppendXML], and [AppendJSONValue] writes a marker in place of a deeper value.
const MaxDepth = 256

// maxPooled bounds the buffers kept in a pool, so one huge card does not stay
// in memory.
const maxPooled = 64 << 10

func appendString(buf []byte, s string) []byte {
	buf = appendLen(append(buf, 's'), len(s))
	return append(buf, s...)
}

func appendStringBytes(buf []byte, b []byte) []byte {
	buf = appendLen(append(buf, 's'), len(b))
	return append(buf, b...)
}

func appendNumberValue(buf []byte, digits []byte) []byte {
	buf = appendLen(append(buf, '#'), len(digits))
	return append(buf, digits...)
}

// member is an object member whose value's canonical form is at buf[lo:hi]
// while the object is being parsed.
type member struct {
	key    string
	lo, hi int
}

// appendObject writes the members, whose values are already in buf[start:],
// as a canonical object at buf[start:]. scratch is reused to hold the values
// meanwhile; the grown scratch is returned.
func appendObject(buf []byte, start int, mems []member, scratch []byte) (_, _ []byte) {
	vals := append(scratch[:0], buf[start:]...)
	buf = append(buf[:start], '{')
	slices.SortStableFunc(mems, func(a, b member) int { return cmp.Compare(a.key, b.key) })
	for i, m := range mems {
		if i+1 < len(mems) && mems[i+1].key == m.key {
			continue // a later duplicate wins, as in encoding/json
		}
		buf = appendString(buf, m.key)
		buf = append(buf, vals[m.lo-start:m.hi-start]...)
	}
	return append(buf, '}'), vals
}

// parserPool holds parsers with their working buffers, because the recursive
// parser keeps the compiler from placing them on the stack.
var parserPool = sync.Pool{New: func() any { return &parser{scratch: make([]byte, 0, 512)} }}

// AppendJSONText parses s as one JSON value (RFC 8259, surrounding whitespace
// allowed) and appends its canonical form. ok is false if s is not valid JSON
// or nests deeper than [MaxDepth].
func AppendJSONText(buf []byte, s string) (_ []byte, ok bool) {
	p := parserPool.Get().(*parser)
	p.sc.Reset(s)
	buf, ok = p.parse(buf)
	p.sc.Reset("")
	if cap(p.scratch) <= maxPooled && cap(p.esc) <= maxPooled {
		parserPool.Put(p)
	}
	return buf, ok
}

// parser writes the canonical form of the JSON text its scanner reads.
type parser struct {
	sc      jsonscan.Scanner[string]
	scratch []byte // for reordering object members
	esc     []byte // a decoded string that held escapes
}

// parse parses the whole input as one value and appends its canonical form.
func (p *parser) parse(buf []byte) (_ []byte, ok bool) {
	buf, ok = p.value(buf, 0)
	return buf, ok && p.sc.AtEnd()
}

func (p *parser) value(buf []byte, depth int) ([]byte, bool) {
	if depth > MaxDepth {
		return buf, false
	}
	switch c := p.sc.Peek(); {
	case c == '{':
		return p.object(buf, depth)
	case c == '[':
		return p.array(buf, depth)
	case c == '"':
		// A string without escapes is written from the input, one with
		// escapes decoded into p.esc. Lone surrogates decode to U+FFFD and
		// bytes that are not UTF-8 are kept, as encoding/json's Valid
		// accepts them.
		s, escaped, ok := p.sc.Quoted()
		switch {
		case !ok:
			return buf, false
		case escaped:
			p.esc, _ = jsonscan.AppendUnquote(p.esc[:0], s)
			return appendStringBytes(buf, p.esc), true
		}
		return appendString(buf, s), true
	case c == 't' || c == 'f' || c == 'n':
		return append(buf, c), p.sc.Literal()
	case c == '-' || (c >= '0' && c <= '9'):
		text, ok := p.sc.Number()
		if !ok {
			return buf, false
		}
		var tmp [32]byte
		return appendNumberValue(buf, appendNumber(tmp[:0], text)), true
	}
	return buf, false
}

func (p *parser) array(buf []byte, depth int) ([]byte, bool) {
	buf = append(buf, '[')
	if p.sc.Open() {
		return append(buf, ']'), true
	}
	for {
		var ok bool
		if buf, ok = p.value(buf, depth+1); !ok {
			return buf, false
		}
		more, ok := p.sc.Next(']')
		switch {
		case !ok:
			return buf, false
		case !more:
			return append(buf, ']'), true
		}
	}
}

func (p *parser) object(buf []byte, depth int) ([]byte, bool) {
	start := len(buf)
	if p.sc.Open() {
		return append(buf, '{', '}'), true
	}
	var stack [8]member
	mems := stack[:0]
	for {
		if p.sc.Peek() != '"' {
			return buf, false
		}
		key, escaped, ok := p.sc.Quoted()
		if !ok || !p.sc.Colon() {
			return buf, false
		}
		if escaped {
			p.esc, _ = jsonscan.AppendUnquote(p.esc[:0], key)
			key = string(p.esc)
		}
		lo := len(buf)
		if buf, ok = p.value(buf, depth+1); !ok {
			return buf, false
		}
		mems = append(mems, member{key: key, lo: lo, hi: len(buf)})
		more, ok := p.sc.Next('}')
		switch {
		case !ok:
			return buf, false
		case !more:
			buf, p.scratch = appendObject(buf, start, mems, p.scratch)
			return buf, true
		}
	}
}
