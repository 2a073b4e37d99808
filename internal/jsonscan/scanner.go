// Package jsonscan reads JSON text (RFC 8259) strictly, without allocating
// and without reflection. It is the one JSON grammar of the module: package
// canon writes its canonical forms with it, and the presets of package
// platform find the members they read with it.
//
// A [Scanner] checks the text token by token while its caller walks the
// structure: canon descends into every value, a preset skips the values it
// does not read with [Scanner.Skip]. Strings are decoded by [AppendUnquote],
// which reports the [Flaw] that encoding/json would repair in silence, so a
// caller that needs the exact text (an id) refuses it and a caller that needs
// stable bytes (a canonical form) keeps the repaired string.
//
// The scanner accepts exactly what encoding/json's Valid accepts, given the
// same nesting bound (encoding/json's is 10000): whitespace is space, tab, CR
// and LF; numbers follow the RFC grammar (no leading zeros, no "+", no
// bare "."); control characters must be escaped; and, as in encoding/json,
// bytes that are not UTF-8 are valid syntax inside a string: finding them is
// left to [AppendUnquote]. Member names are never folded or matched here:
// the caller compares them byte for byte. What a repeated member name means
// is the caller's policy too.
//
// Reading takes time linear in the text and allocates nothing, but for the
// closing brackets of the containers open past 64 levels (one byte each, at
// most the nesting bound). The size of the text is bounded by whoever reads
// it from the network: dedupehttp reads at most DefaultMaxBodySize bytes.
package jsonscan

// Text is what a [Scanner] reads: a string or a byte slice, without copying
// one into the other.
type Text interface{ ~string | ~[]byte }

// A Scanner reads one JSON text from its start. Its methods other than
// [Scanner.Peek], [Scanner.AtEnd], [Scanner.Colon], [Scanner.Next] and
// [Scanner.Skip] read the token at the current offset, where Peek left it
// (after whitespace); on failure every method leaves the offset anywhere. The zero
// value reads an empty text. A Scanner is not safe for concurrent use.
type Scanner[T Text] struct {
	src T
	pos int
}

// NewScanner returns a Scanner that reads src from its start.
func NewScanner[T Text](src T) Scanner[T] { return Scanner[T]{src: src} }

// Reset makes s read src from its start.
func (s *Scanner[T]) Reset(src T) { s.src, s.pos = src, 0 }

// Peek skips whitespace and returns the next byte, or 0 at the end of the
// text (a NUL byte outside a string is never valid JSON either).
func (s *Scanner[T]) Peek() byte {
	s.pos = SkipSpace(s.src, s.pos)
	if s.pos < len(s.src) {
		return s.src[s.pos]
	}
	return 0
}

// AtEnd skips whitespace and reports whether the text is over.
func (s *Scanner[T]) AtEnd() bool {
	s.pos = SkipSpace(s.src, s.pos)
	return s.pos == len(s.src)
}

// SkipSpace returns the index of the first byte of s at or after i that is
// not JSON whitespace, or len(s).
func SkipSpace[T Text](s T, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Literal reads true, false or null.
func (s *Scanner[T]) Literal() bool {
	var lit string
	if s.pos >= len(s.src) {
		return false
	}
	switch s.src[s.pos] {
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	case 'n':
		lit = "null"
	default:
		return false
	}
	if len(s.src)-s.pos < len(lit) {
		return false
	}
	for i := 1; i < len(lit); i++ {
		if s.src[s.pos+i] != lit[i] {
			return false
		}
	}
	s.pos += len(lit)
	return true
}

// Number reads a number and returns its text.
func (s *Scanner[T]) Number() (T, bool) {
	start := s.pos
	end, ok := scanNumber(s.src, start)
	s.pos = end
	return s.src[start:end], ok
}

// IsNumber reports whether s is exactly one JSON number, without
// whitespace.
func IsNumber[T Text](s T) bool {
	end, ok := scanNumber(s, 0)
	return ok && end == len(s)
}

// scanNumber returns the index after the number that starts at s[i].
func scanNumber[T Text](s T, i int) (int, bool) {
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i)
	default:
		return i, false
	}
	if i < len(s) && s[i] == '.' {
		d := i + 1
		if i = skipDigits(s, d); i == d {
			return i, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		if i = skipDigits(s, d); i == d {
			return i, false
		}
	}
	return i, true
}

func skipDigits[T Text](s T, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// IsInteger reports whether s is a decimal integer as an id is written: an
// optional '-' and one or more ASCII digits, of any length, leading zeros
// allowed.
func IsInteger(s string) bool {
	if s != "" && s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
