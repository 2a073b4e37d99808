package jsonscan

import "unicode/utf8"

// Quoted reads a string and returns the text between its quotes, still
// escaped; escaped reports whether it holds a backslash, that is whether
// [AppendUnquote] is needed to decode it. A control character, an unknown
// escape or a \u without four hex digits is not valid. Bytes that are not
// UTF-8 are valid syntax (see the package documentation).
func (s *Scanner[T]) Quoted() (inner T, escaped, ok bool) {
	src := s.src
	start := s.pos + 1
	i := start
	for i < len(src) {
		switch c := src[i]; {
		case c == '"':
			s.pos = i + 1
			return src[start:i], escaped, true
		case c < 0x20:
			return inner, false, false
		case c == '\\':
			n := escapeLen(src, i)
			if n == 0 {
				return inner, false, false
			}
			escaped = true
			i += n
		default:
			i++
		}
	}
	return inner, false, false
}

// escapeLen returns the length of the escape sequence at s[i], a backslash,
// or 0 if it is not one JSON allows.
func escapeLen[T Text](s T, i int) int {
	if i+1 >= len(s) {
		return 0
	}
	switch s[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if _, ok := hex4(s, i+2); ok {
			return 6
		}
	}
	return 0
}

// A Flaw is what keeps a string decoded by [AppendUnquote] from being
// exactly the text its literal spells. encoding/json repairs both kinds with
// U+FFFD in silence, which may map two different literals to one string.
type Flaw uint8

// The flaws [AppendUnquote] reports.
const (
	NoFlaw        Flaw = iota // the string is exactly the text its literal spells
	InvalidUTF8               // a byte that is not part of a UTF-8 sequence, kept as it is
	LoneSurrogate             // an escaped surrogate that is not half of a pair, decoded as U+FFFD
)

// AppendUnquote appends to dst the string whose escaped text, between its
// quotes, is inner, as [Scanner.Quoted] returned it, and reports the first
// flaw of the string. Every escape is decoded (a surrogate pair as its one
// character), a lone surrogate as U+FFFD; a byte that is not UTF-8 is copied
// as it is. An escape that is not valid, which Quoted never returns, is
// copied as it is too and reported as InvalidUTF8.
func AppendUnquote[T Text](dst []byte, inner T) ([]byte, Flaw) {
	flaw := NoFlaw
	for i := 0; i < len(inner); {
		// A run of bytes without escapes is copied in one go and checked as
		// UTF-8 if it is not ASCII; no UTF-8 sequence spans two runs.
		start, high := i, byte(0)
		for ; i < len(inner) && inner[i] != '\\'; i++ {
			high |= inner[i]
		}
		n := len(dst)
		dst = append(dst, inner[start:i]...)
		if high >= utf8.RuneSelf && flaw == NoFlaw && !utf8.Valid(dst[n:]) {
			flaw = InvalidUTF8
		}
		if i == len(inner) {
			break
		}
		r, next := unescape(inner, i)
		f := NoFlaw
		switch {
		case r == badEscape:
			dst, f, next = append(dst, '\\'), InvalidUTF8, i+1
		case r < 0:
			dst, f = utf8.AppendRune(dst, utf8.RuneError), LoneSurrogate
		default:
			dst = utf8.AppendRune(dst, r)
		}
		if flaw == NoFlaw {
			flaw = f
		}
		i = next
	}
	return dst, flaw
}

// badEscape is what unescape returns for an escape that is not valid.
const badEscape = utf8.MaxRune + 1

// unescape decodes the escape sequence at s[i], a backslash, and returns its
// character and the index after it. A lone surrogate gives a negative rune;
// an escape that is not valid gives badEscape and i.
func unescape[T Text](s T, i int) (rune, int) {
	if i+1 >= len(s) {
		return badEscape, i
	}
	switch c := s[i+1]; c {
	case '"', '\\', '/':
		return rune(c), i + 2
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
	default:
		return badEscape, i
	}
	r, ok := hex4(s, i+2)
	switch {
	case !ok:
		return badEscape, i
	case r < 0xD800 || r >= 0xE000:
		return r, i + 6
	case r >= 0xDC00: // a low surrogate first
		return -1, i + 6
	}
	i += 6
	if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
		if lo, ok := hex4(s, i+2); ok && lo >= 0xDC00 && lo < 0xE000 {
			return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), i + 6
		}
	}
	return -1, i // the next escape, if any, is read on its own
}

// hex4 decodes the four hex digits at s[i:i+4].
func hex4[T Text](s T, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for j := i; j < i+4; j++ {
		c := s[j]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
