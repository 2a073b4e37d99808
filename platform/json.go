package platform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gatewaykit/dedupe"
)

// The presets read a delivery with the scanner of this file rather than with
// encoding/json's struct decoding, which matches member names without regard
// to case ({"UPDATE_ID":5} fills a field tagged update_id) and replaces
// invalid UTF-8 and lone surrogates with U+FFFD: either would map two raw ids
// to one key. Here a member name matches only byte for byte (after JSON
// unescaping), a member the preset reads may appear once, and a string that
// is not valid UTF-8, raw or escaped, is refused.

// objectType is the Go type named in the *json.UnmarshalTypeError of a value
// that should have been an object.
var objectType = reflect.TypeFor[map[string]json.RawMessage]()

// stringType is the Go type named when a value should have been a string.
var stringType = reflect.TypeFor[string]()

// decodeBody checks that body is one valid JSON value and an object, and
// finds in it the members named names (see members). A body that is not
// JSON, or JSON other than an object or null, is reported with an error
// wrapping [dedupe.ErrNoMessageID] and a *json.SyntaxError or
// *json.UnmarshalTypeError; a null body has no id.
func decodeBody(name string, body []byte, names []string, vals [][]byte) error {
	if !json.Valid(body) {
		var raw json.RawMessage
		err := json.Unmarshal(body, &raw) // the *json.SyntaxError, off the hot path
		return fmt.Errorf("%w: %s body is not the expected JSON: %w", dedupe.ErrNoMessageID, name, err)
	}
	v := trimSpace(body)
	if isNull(v) {
		return fmt.Errorf("%w: %s body is null", dedupe.ErrNoMessageID, name)
	}
	if err := members(v, names, vals); err != nil {
		return fmt.Errorf("%w: %s body is not the expected JSON: %w", dedupe.ErrNoMessageID, name, err)
	}
	return nil
}

// object finds the members named names in raw, the value of member field of
// a body already checked by decodeBody. An absent or null raw has none.
func object(name, field string, raw []byte, names []string, vals [][]byte) error {
	if raw == nil || isNull(raw) {
		return nil
	}
	if err := members(raw, names, vals); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			typ.Field = field
		}
		return fmt.Errorf("%w: %s body is not the expected JSON: %w", dedupe.ErrNoMessageID, name, err)
	}
	return nil
}

// members finds, in the JSON object obj (valid JSON, no surrounding space),
// the values of the members named names: vals[i] is the raw value of
// names[i], or nil when it is absent. A name matches exactly, byte for byte
// after unescaping. A member the caller asked for that appears twice is
// [dedupe.ErrInvalidKey]: which copy holds the id would be a guess. A value
// other than an object is a *json.UnmarshalTypeError.
func members(obj []byte, names []string, vals [][]byte) error {
	if obj[0] != '{' {
		return &json.UnmarshalTypeError{Value: kindName(obj[0]), Type: objectType}
	}
	i := skipSpace(obj, 1)
	for obj[i] != '}' {
		kEnd := skipString(obj, i)
		key := obj[i:kEnd]
		i = skipSpace(obj, skipSpace(obj, kEnd)+1) // past ':'
		vEnd := skipValue(obj, i)
		if n := matchName(key, names); n >= 0 {
			if vals[n] != nil {
				return fmt.Errorf("%w: member %q appears twice", dedupe.ErrInvalidKey, names[n])
			}
			vals[n] = obj[i:vEnd]
		}
		i = skipSpace(obj, vEnd)
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return nil
}

// matchName returns the index in names of the raw JSON string key, or -1.
func matchName(key []byte, names []string) int {
	inner := key[1 : len(key)-1]
	if bytes.IndexByte(inner, '\\') >= 0 {
		s, err := unquote(key)
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

// kindName names the kind of JSON value that starts with c, as
// encoding/json does in a *json.UnmarshalTypeError.
func kindName(c byte) string {
	switch c {
	case '{':
		return "object"
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

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func trimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

func isNull(raw []byte) bool { return string(raw) == "null" }

// skipString returns the index just past the JSON string that starts at i.
func skipString(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// skipValue returns the index just past the valid JSON value that starts at i.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !isSpace(b[i]) {
		i++
	}
	return i
}

// unquote decodes the valid JSON string literal raw, refusing what
// encoding/json would replace with U+FFFD: bytes that are not UTF-8 and
// escaped surrogates that do not form a pair. The error wraps
// [dedupe.ErrInvalidKey].
func unquote(raw []byte) (string, error) {
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
			if out, i, err = unescape(out, inner, i); err != nil {
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

// unescape appends the character of the escape sequence at s[i] to out and
// returns the index after it.
func unescape(out, s []byte, i int) ([]byte, int, error) {
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
	r := hex4(s[i+2 : i+6])
	i += 6
	if utf16.IsSurrogate(r) {
		if r >= 0xdc00 || i+6 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
			return nil, 0, fmt.Errorf("%w: string holds a lone surrogate", dedupe.ErrInvalidKey)
		}
		if r = utf16.DecodeRune(r, hex4(s[i+2:i+6])); r == utf8.RuneError {
			return nil, 0, fmt.Errorf("%w: string holds a lone surrogate", dedupe.ErrInvalidKey)
		}
		i += 6
	}
	return utf8.AppendRune(out, r), i, nil
}

// hex4 decodes four hex digits, valid by construction.
func hex4(h []byte) rune {
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

// stringField returns the string value raw of member field, "" when it is
// absent or null. Another kind of value is a *json.UnmarshalTypeError.
func stringField(name, field string, raw []byte) (string, error) {
	if raw == nil || isNull(raw) {
		return "", nil
	}
	if raw[0] != '"' {
		return "", fmt.Errorf("%w: %s body is not the expected JSON: %w", dedupe.ErrNoMessageID, name,
			&json.UnmarshalTypeError{Value: kindName(raw[0]), Type: stringType, Field: field})
	}
	s, err := unquote(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %s %s", err, name, field)
	}
	return s, nil
}

// Kinds of JSON value a jsonID holds.
const (
	kindAbsent = iota // absent or null
	kindString
	kindNumber
	kindFalse
	kindOther // true, an object or an array
)

// jsonID is a JSON value that should be an id: a string, or a number kept as
// the literal the platform wrote, never converted to float64.
type jsonID struct {
	text string
	kind uint8
	err  error // a string that is not text
}

// parseID records the kind and text of the raw value of an id member. What
// the value means is decided by require, which knows the member's name.
func parseID(raw []byte) jsonID {
	if raw == nil {
		return jsonID{}
	}
	switch c := raw[0]; {
	case c == '"':
		s, err := unquote(raw)
		return jsonID{text: s, kind: kindString, err: err}
	case c == '-' || '0' <= c && c <= '9':
		return jsonID{text: string(raw), kind: kindNumber}
	case c == 'n':
		return jsonID{}
	case c == 'f':
		return jsonID{kind: kindFalse}
	}
	return jsonID{kind: kindOther}
}

// require returns the id as written, with the rules of [dedupe.ExtractKey]:
// absent, null, "", false and numeric zero are no id ([dedupe.ErrNoMessageID]);
// a number must be an integer; true, objects, arrays and strings that are
// not valid UTF-8 are [dedupe.ErrInvalidKey]. what and field name the id in
// errors.
func (j jsonID) require(what, field string) (string, error) {
	var (
		id  string
		ok  bool
		err error
	)
	switch j.kind {
	case kindString:
		if j.err != nil {
			err = fmt.Errorf("%w: %s %s", j.err, what, field)
		}
		id, ok = j.text, j.text != ""
	case kindNumber:
		var integer bool
		if ok, integer = numberID(j.text); !integer {
			err = fmt.Errorf("%w: %s %s %s is not an integer", dedupe.ErrInvalidKey, what, field, j.text)
		}
		id = j.text
	case kindOther:
		err = fmt.Errorf("%w: %s %s is not a string or a number", dedupe.ErrInvalidKey, what, field)
	}
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", fmt.Errorf("%w: %s has no %s", dedupe.ErrNoMessageID, what, field)
	}
	return id, nil
}

// isNumber reports whether j is the JSON number literal n exactly.
func (j jsonID) isNumber(n string) bool { return j.kind == kindNumber && j.text == n }

// numberID applies the rules [dedupe.ExtractKey] has for a [json.Number] to
// the number literal s: a zero is no id (ok is false), and any other number
// must be an integer, written with digits alone.
func numberID(s string) (ok, integer bool) {
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == 0 {
		return false, true
	}
	return true, isDigits(s)
}

// isDigits reports whether s is a decimal integer: digits with an optional
// leading minus sign.
func isDigits(s string) bool {
	s = strings.TrimPrefix(s, "-")
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
