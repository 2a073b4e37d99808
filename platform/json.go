package platform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// The presets read a delivery with the module's one JSON scanner,
// internal/jsonscan, rather than with encoding/json's struct decoding, which
// matches member names without regard to case ({"UPDATE_ID":5} fills a field
// tagged update_id) and replaces invalid UTF-8 and lone surrogates with
// U+FFFD: either would map two raw ids to one key. Here a member name matches only byte for byte (after JSON
// unescaping), a member the preset reads may appear once, and a string that
// is not valid UTF-8, raw or escaped, is refused.

// maxDepth is how deep a body's objects and arrays may nest: encoding/json's
// bound, so a body is valid JSON for a preset exactly when json.Valid says so.
const maxDepth = 10000

// objectType is the Go type named in the *json.UnmarshalTypeError of a value
// that should have been an object.
var objectType = reflect.TypeFor[map[string]json.RawMessage]()

// stringType is the Go type named when a value should have been a string.
var stringType = reflect.TypeFor[string]()

// errNotJSON and errNull are what members finds of a text that is not valid
// JSON, and of the JSON text null.
var (
	errNotJSON = errors.New("not JSON")
	errNull    = errors.New("null")
)

// decodeBody checks that body is one valid JSON value and an object, and
// finds in it the members named names (see members). A body that is not
// JSON, or JSON other than an object or null, is reported with an error
// wrapping [dedupe.ErrNoMessageID] and a *json.SyntaxError or
// *json.UnmarshalTypeError; a null body has no id.
func decodeBody(name string, body []byte, names []string, vals [][]byte) error {
	switch err := members(body, names, vals); err {
	case nil:
		return nil
	case errNotJSON:
		var raw json.RawMessage
		err = json.Unmarshal(body, &raw) // the *json.SyntaxError, off the hot path
		if err == nil {
			err = &json.SyntaxError{} // unreachable while the two agree, as FuzzMembersAsLegacy checks
		}
		return fmt.Errorf("%w: %s body is not the expected JSON: %w", dedupe.ErrNoMessageID, name, err)
	case errNull:
		return fmt.Errorf("%w: %s body is null", dedupe.ErrNoMessageID, name)
	default:
		return notExpected(name, "body", err)
	}
}

// notExpected wraps err, which members found in field (the body, or one of
// its members) of a delivery of platform name. A member read twice
// (twiceError) is [dedupe.ErrInvalidKey] and not [dedupe.ErrNoMessageID]:
// an id that may be either of two values is not a missing id, and such a
// delivery is refused (400 in package dedupehttp) rather than served without
// deduplication, where every copy would run. Anything else wraps
// [dedupe.ErrNoMessageID].
func notExpected(name, field string, err error) error {
	var twice twiceError
	if errors.As(err, &twice) {
		return fmt.Errorf("%w: %s %s has %w", dedupe.ErrInvalidKey, name, field, err)
	}
	return fmt.Errorf("%w: %s body is not the expected JSON: %w", dedupe.ErrNoMessageID, name, err)
}

// twiceError is what members finds of an object holding a member it reads
// twice: which copy holds the id would be a guess.
type twiceError struct{ member string }

// Error returns the text of a twiceError.
func (e twiceError) Error() string { return fmt.Sprintf("member %q twice", e.member) }

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
		return notExpected(name, field, err)
	}
	return nil
}

// members reads the JSON text text to its end with the module's one JSON
// scanner and finds the values of the members named names in the object it
// holds: vals[i] is the raw value of names[i], or nil when it is absent. A
// name matches exactly, byte for byte after unescaping. A text that is not
// one valid JSON value (whitespace around it allowed) is errNotJSON, and its
// vals are all nil; null is errNull; another value than an object is a
// *json.UnmarshalTypeError. A member the caller asked for that appears twice
// is a twiceError: which copy holds the id would be a guess; the members
// after it are not recorded.
func members(text []byte, names []string, vals [][]byte) error {
	sc := jsonscan.NewScanner(text)
	if c := sc.Peek(); c != '{' {
		v, ok := sc.Skip(maxDepth)
		switch {
		case !ok || !sc.AtEnd():
			return errNotJSON
		case isNull(v):
			return errNull
		}
		return &json.UnmarshalTypeError{Value: kindName(c), Type: objectType}
	}
	var dup error
	more, ok := !sc.Open(), true
	for ok && more {
		var key, v []byte
		var escaped bool
		if key, escaped, v, ok = member(&sc); !ok {
			break
		}
		if n := matchName(key, escaped, names); n >= 0 && dup == nil {
			if vals[n] != nil {
				dup = twiceError{names[n]}
			} else {
				vals[n] = v
			}
		}
		more, ok = sc.Next('}')
	}
	if !ok || !sc.AtEnd() {
		clear(vals)
		return errNotJSON
	}
	return dup
}

// member reads an object member: its name, as [jsonscan.Scanner.Quoted]
// returns it, and the text of its value.
func member(sc *jsonscan.Scanner[[]byte]) (key []byte, escaped bool, v []byte, ok bool) {
	if sc.Peek() != '"' {
		return nil, false, nil, false
	}
	if key, escaped, ok = sc.Quoted(); !ok || !sc.Colon() {
		return nil, false, nil, false
	}
	v, ok = sc.Skip(maxDepth - 1)
	return key, escaped, v, ok
}

// matchName returns the index in names of the member name key, as
// [jsonscan.Scanner.Quoted] returns it, or -1.
func matchName(key []byte, escaped bool, names []string) int {
	if escaped {
		var tmp [64]byte
		s, flaw := jsonscan.AppendUnquote(tmp[:0], key)
		if flaw != jsonscan.NoFlaw {
			return -1 // a name that is not text matches no name
		}
		key = s
	}
	for n, name := range names {
		if string(key) == name {
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

// startsObject reports whether the first byte of b after whitespace is '{'.
func startsObject(b []byte) bool {
	i := jsonscan.SkipSpace(b, 0)
	return i < len(b) && b[i] == '{'
}

func isNull(raw []byte) bool { return string(raw) == "null" }

// unquote decodes the JSON string literal raw, which the scanner has read,
// refusing what encoding/json would replace with U+FFFD: bytes that are not
// UTF-8 and escaped surrogates that do not form a pair. The error wraps
// [dedupe.ErrInvalidKey].
func unquote(raw []byte) (string, error) {
	inner := raw[1 : len(raw)-1]
	flaw := jsonscan.NoFlaw
	if bytes.IndexByte(inner, '\\') >= 0 {
		inner, flaw = jsonscan.AppendUnquote(make([]byte, 0, len(inner)), inner)
	} else if !utf8.Valid(inner) {
		flaw = jsonscan.InvalidUTF8
	}
	switch flaw {
	case jsonscan.InvalidUTF8:
		return "", fmt.Errorf("%w: string is not valid UTF-8", dedupe.ErrInvalidKey)
	case jsonscan.LoneSurrogate:
		return "", fmt.Errorf("%w: string holds a lone surrogate", dedupe.ErrInvalidKey)
	}
	return string(inner), nil
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
			err = fmt.Errorf("%w: %s %s is a number but not an integer", dedupe.ErrInvalidKey, what, field)
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
	return true, jsonscan.IsInteger(s)
}
