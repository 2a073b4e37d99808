package platform

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// A pointer is a JSON Pointer (RFC 6901) into a delivery's body: its
// reference tokens, unescaped.
type pointer []string

// maxPointerTokens bounds a pointer's depth: no body a platform sends nests
// an id deeper.
const maxPointerTokens = 32

// parsePointer parses the JSON Pointer s. The pointer "" (the whole body)
// is refused: a body is an object, never an id.
func parsePointer(s string) (pointer, error) {
	switch {
	case s == "":
		return nil, errors.New("is the whole body, which is no id")
	case s[0] != '/':
		return nil, errors.New(`is not a JSON Pointer: it must start with "/"`)
	case !utf8.ValidString(s):
		return nil, errors.New("is not valid UTF-8")
	}
	toks := strings.Split(s[1:], "/")
	if len(toks) > maxPointerTokens {
		return nil, fmt.Errorf("has more than %d reference tokens", maxPointerTokens)
	}
	for i, t := range toks {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || t[j+1] != '0' && t[j+1] != '1') {
				return nil, errors.New(`has a "~" that is neither "~0" nor "~1"`)
			}
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

// String returns the pointer as RFC 6901 writes it.
func (p pointer) String() string {
	var b strings.Builder
	for _, t := range p {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// errFound ends a walk over an array at the element sought.
var errFound = errors.New("found")

// id returns the id the pointer finds in body, an object, with the rules of
// [jsonID.require]. A token names a member of an object (exactly; a member
// twice is [dedupe.ErrInvalidKey]) or, written as digits without a leading
// zero, an element of an array; a value the pointer cannot go through (a
// scalar, an absent member, an element past the end, "-") holds no id.
func (p pointer) id(name string, body []byte) (string, error) {
	var v [1][]byte
	if err := decodeBody(name, body, p[:1], v[:]); err != nil {
		return "", err
	}
	raw := v[0]
	for i, tok := range p[1:] {
		if raw == nil {
			break
		}
		var err error
		if raw, err = p.step(name, i+1, raw, tok); err != nil {
			return "", err
		}
	}
	return parseID(raw).require(name, p.String())
}

// step returns the value that token tok, the i-th of p, names in raw, a
// value of a body already checked by decodeBody, or nil.
func (p pointer) step(name string, i int, raw []byte, tok string) ([]byte, error) {
	switch raw[0] {
	case '{':
		var v [1][]byte
		err := object(name, pointer(p[:i]).String(), raw, []string{tok}, v[:])
		return v[0], err
	case '[':
		n, ok := arrayIndex(tok)
		if !ok {
			return nil, nil
		}
		var found []byte
		err := elements(name, pointer(p[:i]).String(), raw, func(e []byte) error {
			if n == 0 {
				found = e
				return errFound
			}
			n--
			return nil
		})
		if err != nil && err != errFound {
			return nil, err
		}
		return found, nil
	}
	return nil, nil
}

// arrayIndex reads an array index token: digits, without a leading zero.
func arrayIndex(tok string) (int, bool) {
	if !digitsOK(tok) || len(tok) > 9 || tok[0] == '0' && len(tok) > 1 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(tok); i++ {
		n = n*10 + int(tok[i]-'0')
	}
	return n, true
}
