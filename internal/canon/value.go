package canon

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"

	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// MaxValues bounds the values [AppendJSONValue] reads from one Go value:
// scalars, containers and their members, each counted once every time it is
// reached, so a value that contains itself is read until the limit.
const MaxValues = 1 << 14

// MaxSize bounds, in bytes, the canonical form [AppendJSONValue] and
// [AppendScalar] write of one Go value: once the form is longer, no further
// value is read and a "!b" marker ends it. A form of more than MaxSize bytes
// was cut, so a caller that needs the whole form refuses it. One value is
// written whole, so the form never exceeds MaxSize by more than the longest
// string or raw JSON held in the value.
const MaxSize = 1 << 20

// Markers of the canonical form of Go values, beside the JSON alphabet:
//
//	"!d"  a value nested deeper than MaxDepth, not read
//	"!n"  the MaxValues limit was reached here; nothing after it was read
//	"!b"  the form had grown past MaxSize bytes here; nothing after it
//	      was read
//	"?"   a value JSON cannot hold, by its Go type: "?" then the type's
//	      name as a string, then "{" fields "}" for a struct (each field a
//	      name string and a value, unexported fields too), a string for a
//	      float that is not finite or for bytes that are not a JSON number or
//	      text, or "." for anything else (functions, channels, complex
//	      numbers, maps with other keys)
//
// A marker is self-delimiting, so the form stays injective for the values
// read in full.

// AppendJSONValue appends the canonical form of a Go value: for a value as
// encoding/json or an adapter builds it (nil, bool, string, numbers,
// [encoding/json.Number], []any, map[string]any, [encoding/json.RawMessage]),
// the same bytes as [AppendJSONText] on its JSON text. Other Go values are
// read by reflection (maps with string or integer keys and slices like JSON,
// structs by type name and fields, pointers through), never by their methods
// or fmt. Reading is bounded by [MaxDepth] and [MaxValues]: past a limit a
// marker is written, so a value that contains itself gives a stable form.
// Reading also stops once the form is longer than [MaxSize] bytes: a form
// that long was cut, and is no value's identity.
func AppendJSONValue(buf []byte, v any) []byte {
	w := walker{left: MaxValues, end: len(buf) + MaxSize}
	return w.value(buf, v, 0)
}

// walker writes one Go value, counting the values it reads and the bytes it
// writes.
type walker struct {
	left int // values that may still be read; -1 once a limit was reached
	end  int // the length of the buffer past which no value is read
}

// enter counts a value about to be written at depth and reports whether it
// may be, after writing the marker of a limit it reaches.
func (w *walker) enter(buf []byte, depth int) ([]byte, bool) {
	switch {
	case w.left < 0:
		return buf, false
	case w.left == 0:
		w.left = -1
		return append(buf, '!', 'n'), false
	case len(buf) > w.end:
		w.left = -1
		return append(buf, '!', 'b'), false
	case depth > MaxDepth:
		return append(buf, '!', 'd'), false
	}
	w.left--
	return buf, true
}

func (w *walker) value(buf []byte, v any, depth int) []byte {
	buf, ok := w.enter(buf, depth)
	if !ok {
		return buf
	}
	switch v := v.(type) {
	case nil:
		return append(buf, 'n')
	case bool:
		return appendBool(buf, v)
	case string:
		return appendString(buf, v)
	case json.Number:
		if !jsonscan.IsNumber(v) {
			return appendForeign(buf, "json.Number", string(v))
		}
		var tmp [32]byte
		return appendNumberValue(buf, appendNumber(tmp[:0], string(v)))
	case float64:
		return appendFloatValue(buf, v, 64)
	case float32:
		return appendFloatValue(buf, float64(v), 32)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		var tmp [32]byte
		b, _ := AppendInteger(tmp[:0], v)
		return appendNumberValue(buf, b)
	case []any:
		buf = append(buf, '[')
		for _, e := range v {
			if buf = w.value(buf, e, depth+1); w.left < 0 {
				break
			}
		}
		return append(buf, ']')
	case map[string]any:
		return w.stringMap(buf, v, depth)
	case json.RawMessage:
		if out, ok := AppendJSONText(buf, string(v)); ok {
			return out
		}
		return appendForeign(buf, "json.RawMessage", string(v))
	}
	return w.reflect(buf, reflect.ValueOf(v), depth)
}

func appendBool(buf []byte, v bool) []byte {
	if v {
		return append(buf, 't')
	}
	return append(buf, 'f')
}

// appendFloatValue appends a finite float as a JSON number, and any other as
// a foreign value.
func appendFloatValue(buf []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return appendForeign(buf, "float"+strconv.Itoa(bits), strconv.FormatFloat(f, 'g', -1, bits))
	}
	var tmp [32]byte
	return appendNumberValue(buf, appendFloat(tmp[:0], f))
}

// appendForeign appends a value JSON cannot hold: its type and its text.
func appendForeign(buf []byte, typ, text string) []byte {
	return appendString(appendString(append(buf, '?'), typ), text)
}

func (w *walker) stringMap(buf []byte, m map[string]any, depth int) []byte {
	if len(m) > w.left {
		w.left = -1 // too big to sort and read
		return append(buf, '!', 'n')
	}
	var stack [16]string
	keys := stack[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	buf = append(buf, '{')
	for _, k := range keys {
		buf = appendString(buf, k)
		if buf = w.value(buf, m[k], depth+1); w.left < 0 {
			break
		}
	}
	return append(buf, '}')
}
