package platform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/gatewaykit/dedupe"
)

// decodeBody decodes a platform's JSON body into v, a small struct of the
// fields a preset needs; the rest of the body is skipped, not built.
func decodeBody(name string, body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %s body is not the expected JSON: %w", dedupe.ErrNoMessageID, name, err)
	}
	return nil
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
}

// UnmarshalJSON records the value's kind and text. It never fails: what the
// value means is decided by require, which knows the field's name.
func (j *jsonID) UnmarshalJSON(b []byte) error {
	switch c := b[0]; {
	case c == '"':
		j.kind = kindString
		if bytes.IndexByte(b, '\\') < 0 {
			j.text = string(b[1 : len(b)-1])
			return nil
		}
		return json.Unmarshal(b, &j.text)
	case c == '-' || '0' <= c && c <= '9':
		j.kind, j.text = kindNumber, string(b)
	case c == 'n':
		*j = jsonID{}
	case c == 'f':
		*j = jsonID{kind: kindFalse}
	default:
		*j = jsonID{kind: kindOther}
	}
	return nil
}

// require returns the id as written, with the rules of [dedupe.ExtractKey]:
// absent, null, "", false and numeric zero are no id ([dedupe.ErrNoMessageID]);
// a number must be an integer; true, objects and arrays are
// [dedupe.ErrInvalidKey]. what and field name the id in errors.
func (j jsonID) require(what, field string) (string, error) {
	var (
		id  string
		ok  bool
		err error
	)
	switch j.kind {
	case kindString:
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
