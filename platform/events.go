package platform

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// What the presets of batched platforms (LINE, Meta, Matrix) share: walking
// the arrays of a delivery, and the MessageID of a delivery read through its
// Events.

// arrayType is the Go type named when a value should have been an array.
var arrayType = reflect.TypeFor[[]json.RawMessage]()

// elements calls fn with the text of each element of raw, the value of
// member field of a body already checked by decodeBody, in order. An absent
// or null raw has none. A value other than an array is an error wrapping
// [dedupe.ErrNoMessageID]; fn's error ends the walk and is returned.
func elements(name, field string, raw []byte, fn func(elem []byte) error) error {
	if raw == nil || isNull(raw) {
		return nil
	}
	sc := jsonscan.NewScanner(raw)
	if sc.Peek() != '[' {
		return fmt.Errorf("%w: %s body is not the expected JSON: %w", dedupe.ErrNoMessageID, name,
			&json.UnmarshalTypeError{Value: kindName(raw[0]), Type: arrayType, Field: field})
	}
	if sc.Open() {
		return nil
	}
	for {
		v, ok := sc.Skip(maxDepth)
		if !ok { // unreachable: raw is a value the scanner already read whole
			return fmt.Errorf("%w: %s %s is not JSON", dedupe.ErrNoMessageID, name, field)
		}
		if err := fn(v); err != nil {
			return err
		}
		more, ok := sc.Next(']')
		if !ok {
			return fmt.Errorf("%w: %s %s is not JSON", dedupe.ErrNoMessageID, name, field)
		}
		if !more {
			return nil
		}
	}
}

// keyEvent returns the event raw keyed by id, or, when err is not nil, the
// event raw that cannot be keyed, with err: one bad event is returned in its
// place rather than failing the batch.
func keyEvent(raw []byte, id string, err error) Event {
	if err != nil {
		return Event{Raw: raw, Err: err}
	}
	return Event{ID: id, Raw: raw}
}

// onlyEvent is the MessageID of a batched platform's delivery, from what its
// Events func found: the id of its one event, or its Err. A delivery without events is
// [ErrNotAMessage] (what, such as "url verification", says what it is), so
// that it reaches the handler; one with several is [dedupe.ErrNoMessageID]:
// one key cannot stand for several events, and [Preset.Events] must be used.
func onlyEvent(name, what string, evs []Event, err error) (string, error) {
	switch {
	case err != nil:
		return "", err
	case len(evs) == 0:
		return "", fmt.Errorf("%w: %s %s", ErrNotAMessage, name, what)
	case len(evs) > 1:
		return "", fmt.Errorf("%w: %s delivery holds %d events: key each with Preset.Events", dedupe.ErrNoMessageID, name, len(evs))
	}
	return evs[0].ID, evs[0].Err
}

// wordOK reports whether s is a non-empty word of lower-case ASCII letters,
// digits and '_': a part of a key that ends at the next ':'.
func wordOK(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return s != ""
}

// digitsOK reports whether s is a non-empty string of ASCII digits.
func digitsOK(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// element finds the members named names in raw, an element of an array of
// a body already checked by decodeBody, which must be an object: what field
// names in errors.
func element(name, field string, raw []byte, names []string, vals [][]byte) error {
	if raw == nil || raw[0] != '{' {
		c := byte('n')
		if raw != nil {
			c = raw[0]
		}
		return fmt.Errorf("%w: %s body is not the expected JSON: %w", dedupe.ErrNoMessageID, name,
			&json.UnmarshalTypeError{Value: kindName(c), Type: objectType, Field: field})
	}
	return object(name, field, raw, names, vals)
}
