// Package canon writes the canonical forms the correlator's content signature
// is built from: length-prefixed fields (netstrings), scalars by value, JSON
// and XML payloads written in one injective alphabet whatever their layout,
// and the identity of an image. Every function appends to a caller's buffer
// and is safe for concurrent use.
//
// It imports nothing of the dedupe module but internal/jsonscan, which
// imports nothing of it either, so the root package and its subpackages can
// all use it.
package canon

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// AppendNetstring appends s as a netstring, "{len}:{s},". A sequence of
// netstrings is injective: no two different lists of strings give one
// sequence.
func AppendNetstring(buf []byte, s string) []byte {
	buf = appendLen(buf, len(s))
	buf = append(buf, s...)
	return append(buf, ',')
}

// AppendNetstringBytes is [AppendNetstring] for a byte slice.
func AppendNetstringBytes(buf, b []byte) []byte {
	buf = appendLen(buf, len(b))
	buf = append(buf, b...)
	return append(buf, ',')
}

// appendLen appends a length and ':', the head of a netstring.
func appendLen(buf []byte, n int) []byte {
	switch {
	case n < 10:
		return append(buf, byte('0'+n), ':')
	case n < 100:
		return append(buf, byte('0'+n/10), byte('0'+n%10), ':')
	}
	return append(strconv.AppendInt(buf, int64(n), 10), ':')
}

// AppendScalarNetstring appends the text form of a scalar, as [AppendScalar]
// writes it, as a netstring.
func AppendScalarNetstring(buf []byte, v any) []byte {
	if s, ok := v.(string); ok {
		return AppendNetstring(buf, s)
	}
	var tmp [64]byte
	return AppendNetstringBytes(buf, AppendScalar(tmp[:0], v))
}

// AppendScalar appends the text form of an id or text value, so that the
// number 10001 and the string "10001" give the same bytes. nil gives nothing.
// Any other Go value (a map where an id belongs) is written as a NUL byte and
// its bounded canonical form (see [AppendJSONValue] and [MaxSize]), never
// through fmt.
func AppendScalar(buf []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return buf
	case string:
		return append(buf, v...)
	case json.Number:
		return appendNumber(buf, string(v))
	case float64:
		return appendFloat(buf, v)
	case float32:
		return appendFloat(buf, float64(v))
	case bool:
		return strconv.AppendBool(buf, v)
	}
	if b, ok := AppendInteger(buf, v); ok {
		return b
	}
	return appendOther(buf, v)
}

// appendOther appends a NUL byte and the bounded canonical form of v. The form
// is written to a buffer of its own: passed through the recursive walk, buf
// would escape, and every caller's stack buffer with it.
func appendOther(buf []byte, v any) []byte {
	w := walker{left: MaxValues, end: MaxSize}
	return append(append(buf, 0), w.value(nil, v, 0)...)
}

// AppendInteger appends v in decimal if it has one of Go's integer types, and
// reports whether it had.
func AppendInteger(buf []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case int:
		return strconv.AppendInt(buf, int64(v), 10), true
	case int8:
		return strconv.AppendInt(buf, int64(v), 10), true
	case int16:
		return strconv.AppendInt(buf, int64(v), 10), true
	case int32:
		return strconv.AppendInt(buf, int64(v), 10), true
	case int64:
		return strconv.AppendInt(buf, v, 10), true
	case uint:
		return strconv.AppendUint(buf, uint64(v), 10), true
	case uint8:
		return strconv.AppendUint(buf, uint64(v), 10), true
	case uint16:
		return strconv.AppendUint(buf, uint64(v), 10), true
	case uint32:
		return strconv.AppendUint(buf, uint64(v), 10), true
	case uint64:
		return strconv.AppendUint(buf, v, 10), true
	}
	return buf, false
}

// appendNumber appends a JSON number by value: integers as written (exact,
// "-0" as "0"), other numbers through float64 as [appendFloat] writes them,
// so 1.0, 1e0 and 1 are equal. Text that is not a number is appended as is.
func appendNumber(buf []byte, text string) []byte {
	if jsonscan.IsInteger(text) {
		if text == "-0" {
			text = "0"
		}
		return append(buf, text...)
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return append(buf, text...)
	}
	return appendFloat(buf, f)
}

// appendFloat appends f as an integer when it is integral and below 1e15
// (where every integer is exact), and in the shortest 'g' form otherwise.
func appendFloat(buf []byte, f float64) []byte {
	if f == 0 {
		return append(buf, '0')
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.AppendInt(buf, int64(f), 10)
	}
	return strconv.AppendFloat(buf, f, 'g', -1, 64)
}

// hexVal returns the value of a hex digit.
func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// isHex reports whether s is a non-empty string of hex digits.
func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if _, ok := hexVal(s[i]); !ok {
			return false
		}
	}
	return s != ""
}

// appendLowerASCII appends s with ASCII letters lower-cased.
func appendLowerASCII(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	return buf
}
