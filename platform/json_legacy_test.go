package platform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gatewaykit/dedupe"
)

// This file keeps the JSON scanner the presets had before they were built on
// internal/jsonscan, unchanged but for its names, as the oracle of
// FuzzMembersAsLegacy: a preset must find the same members, refuse the same
// bodies with the same errors and decode the same strings.

// legacyDecodeBody checks that body is one valid JSON value and an legacyObject, and
// finds in it the legacyMembers named names (see legacyMembers). A body that is not
// JSON, or JSON other than an legacyObject or null, is reported with an error
// wrapping [dedupe.ErrNoMessageID] and a *json.SyntaxError or
// *json.UnmarshalTypeError; a null body has no id.
func legacyDecodeBody(name string, body []byte, names []string, vals [][]byte) error {
	if !json.Valid(body) {
		var raw json.RawMessage
		err := json.Unmarshal(body, &raw) // the *json.SyntaxError, off the hot path
		return fmt.Errorf("%w: %s body is not the expected JSON: %w", dedupe.ErrNoMessageID, name, err)
	}
	v := legacyTrimSpace(body)
	if legacyIsNull(v) {
		return fmt.Errorf("%w: %s body is null", dedupe.ErrNoMessageID, name)
	}
	if err := legacyMembers(v, names, vals); err != nil {
		return legacyNotExpected(name, "body", err)
	}
	return nil
}

// legacyObject finds the legacyMembers named names in raw, the value of member field of
// a body already checked by legacyDecodeBody. An absent or null raw has none.
func legacyObject(name, field string, raw []byte, names []string, vals [][]byte) error {
	if raw == nil || legacyIsNull(raw) {
		return nil
	}
	if err := legacyMembers(raw, names, vals); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			typ.Field = field
		}
		return legacyNotExpected(name, field, err)
	}
	return nil
}

// legacyNotExpected is notExpected, written again: a member twice is
// [dedupe.ErrInvalidKey] alone, anything else [dedupe.ErrNoMessageID].
func legacyNotExpected(name, field string, err error) error {
	if _, twice := err.(twiceError); twice {
		return fmt.Errorf("%w: %s %s has %w", dedupe.ErrInvalidKey, name, field, err)
	}
	return fmt.Errorf("%w: %s body is not the expected JSON: %w", dedupe.ErrNoMessageID, name, err)
}

// legacyMembers finds, in the JSON legacyObject obj (valid JSON, no surrounding space),
// the values of the legacyMembers named names: vals[i] is the raw value of
// names[i], or nil when it is absent. A name matches exactly, byte for byte
// after unescaping. A member the caller asked for that appears twice is a
// twiceError: which copy holds the id would be a guess. A value
// other than an legacyObject is a *json.UnmarshalTypeError.
func legacyMembers(obj []byte, names []string, vals [][]byte) error {
	if obj[0] != '{' {
		return &json.UnmarshalTypeError{Value: legacyKindName(obj[0]), Type: objectType}
	}
	i := legacySkipSpace(obj, 1)
	for obj[i] != '}' {
		kEnd := legacySkipString(obj, i)
		key := obj[i:kEnd]
		i = legacySkipSpace(obj, legacySkipSpace(obj, kEnd)+1) // past ':'
		vEnd := legacySkipValue(obj, i)
		if n := legacyMatchName(key, names); n >= 0 {
			if vals[n] != nil {
				return twiceError{names[n]}
			}
			vals[n] = obj[i:vEnd]
		}
		i = legacySkipSpace(obj, vEnd)
		if obj[i] == ',' {
			i = legacySkipSpace(obj, i+1)
		}
	}
	return nil
}

// legacyMatchName returns the index in names of the raw JSON string key, or -1.
func legacyMatchName(key []byte, names []string) int {
	inner := key[1 : len(key)-1]
	if bytes.IndexByte(inner, '\\') >= 0 {
		s, err := legacyUnquote(key)
		if err != nil {
			return -1 // a name that is not text matches no name
		}
		inner = []byte(s)
	}
	for n, name := range names {
		if string(inner) == name {
			return n
		}
	}
	return -1
}

// legacyKindName names the kind of JSON value that starts with c, as
// encoding/json does in a *json.UnmarshalTypeError.
func legacyKindName(c byte) string {
	switch c {
	case '{':
		return "legacyObject"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

func legacyIsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func legacySkipSpace(b []byte, i int) int {
	for i < len(b) && legacyIsSpace(b[i]) {
		i++
	}
	return i
}

func legacyTrimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && legacyIsSpace(b[i]) {
		i++
	}
	for j > i && legacyIsSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

func legacyIsNull(raw []byte) bool { return string(raw) == "null" }

// legacySkipString returns the index just past the JSON string that starts at i.
func legacySkipString(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// legacySkipValue returns the index just past the valid JSON value that starts at i.
func legacySkipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return legacySkipString(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = legacySkipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !legacyIsSpace(b[i]) {
		i++
	}
	return i
}

// legacyUnquote decodes the valid JSON string literal raw, refusing what
// encoding/json would replace with U+FFFD: bytes that are not UTF-8 and
// escaped surrogates that do not form a pair. The error wraps
// [dedupe.ErrInvalidKey].
func legacyUnquote(raw []byte) (string, error) {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		if !utf8.Valid(inner) {
			return "", fmt.Errorf("%w: string is not valid UTF-8", dedupe.ErrInvalidKey)
		}
		return string(inner), nil
	}
	out := make([]byte, 0, len(inner))
	for i := 0; i < len(inner); {
		c := inner[i]
		switch {
		case c == '\\':
			var err error
			if out, i, err = legacyUnescape(out, inner, i); err != nil {
				return "", err
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(inner[i:])
			if r == utf8.RuneError && n == 1 {
				return "", fmt.Errorf("%w: string is not valid UTF-8", dedupe.ErrInvalidKey)
			}
			out = append(out, inner[i:i+n]...)
			i += n
		}
	}
	return string(out), nil
}

// legacyUnescape appends the character of the escape sequence at s[i] to out and
// returns the index after it.
func legacyUnescape(out, s []byte, i int) ([]byte, int, error) {
	switch c := s[i+1]; c {
	case 'b':
		return append(out, '\b'), i + 2, nil
	case 'f':
		return append(out, '\f'), i + 2, nil
	case 'n':
		return append(out, '\n'), i + 2, nil
	case 'r':
		return append(out, '\r'), i + 2, nil
	case 't':
		return append(out, '\t'), i + 2, nil
	case 'u':
	default: // '"', '\\', '/'
		return append(out, c), i + 2, nil
	}
	r := legacyHex4(s[i+2 : i+6])
	i += 6
	if utf16.IsSurrogate(r) {
		if r >= 0xdc00 || i+6 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
			return nil, 0, fmt.Errorf("%w: string holds a lone surrogate", dedupe.ErrInvalidKey)
		}
		if r = utf16.DecodeRune(r, legacyHex4(s[i+2:i+6])); r == utf8.RuneError {
			return nil, 0, fmt.Errorf("%w: string holds a lone surrogate", dedupe.ErrInvalidKey)
		}
		i += 6
	}
	return utf8.AppendRune(out, r), i, nil
}

// legacyHex4 decodes four hex digits, valid by construction.
func legacyHex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
