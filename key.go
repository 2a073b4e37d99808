package dedupe

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gatewaykit/dedupe/internal/canon"
	"github.com/gatewaykit/dedupe/internal/jsonscan"
)

// Limits on the parts of a [Key], in bytes: 64 for the channel, 256 for the
// message id. They keep rows and cache entries bounded; real platform ids are
// far shorter.
const (
	maxChannelLen   = 64
	maxMessageIDLen = 256
)

// Key identifies one platform message: the channel (adapter or platform, such
// as "telegram") and the platform's message id, "{channel}:{message_id}" as
// text, the key the NekoBot gateway stores.
type Key struct {
	Channel   string
	MessageID string
}

// String returns the key as "{channel}:{message_id}", for example "telegram:123".
func (k Key) String() string {
	return k.Channel + ":" + k.MessageID
}

// Validate reports whether k can be stored: both parts non-empty UTF-8 without
// control characters, a channel of at most 64 bytes and a message id of at
// most 256, and no ':' in the channel. The error wraps [ErrInvalidKey].
func (k Key) Validate() error {
	if err := checkPart("channel", k.Channel, maxChannelLen); err != nil {
		return err
	}
	if strings.IndexByte(k.Channel, ':') >= 0 {
		return fmt.Errorf("%w: channel %q contains ':'", ErrInvalidKey, k.Channel)
	}
	return checkPart("message id", k.MessageID, maxMessageIDLen)
}

func checkPart(name, s string, max int) error {
	if s == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalidKey, name)
	}
	if len(s) > max {
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalidKey, name, len(s), max)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f { // not printable ASCII: look closer
			return checkText(name, s[i:])
		}
	}
	return nil
}

// checkText checks that s is UTF-8 without control characters.
func checkText(name, s string) error {
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			if !utf8.ValidString(s) {
				return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidKey, name)
			}
		case unicode.IsControl(r):
			return fmt.Errorf("%w: %s holds control character %U", ErrInvalidKey, name, r)
		}
	}
	return nil
}

// ParseKey parses the text form of a key, splitting at the first ':', so
// "web:a:b" is channel "web" with message id "a:b". The key is validated.
func ParseKey(s string) (Key, error) {
	ch, id, ok := strings.Cut(s, ":")
	if !ok {
		return Key{}, fmt.Errorf("%w: %q has no ':'", ErrInvalidKey, s)
	}
	k := Key{Channel: ch, MessageID: id}
	if err := k.Validate(); err != nil {
		return Key{}, err
	}
	return k, nil
}

// maxExactFloat is the largest integer up to which every integer is exactly
// representable in a float64 (2^53).
const maxExactFloat = 1 << 53

// ExtractKey finds the message id in a message an adapter has already parsed,
// in the NekoBot gateway's layout, and returns the key for channel. It looks at
// parsed["metadata"]["message_id"], parsed["metadata"][channel+"_message_id"]
// and parsed["message_id"], in that order, skipping absent, nil, "", false and
// zero values, as NekoBot does. For raw webhook bodies use package platform,
// whose presets also authenticate them; note that its OneBot key includes the
// bot ("onebot:<self_id>:<message_id>", since OneBot counts ids per bot) while
// ExtractKey's does not ("onebot:<message_id>", as NekoBot stores it), so do not
// mix the two on one store.
//
// Strings, [json.Number] and integers are taken as written; a float64 only
// when integral and at most 2^53, since larger ids (Discord snowflakes) have
// lost digits: decode with [json.Decoder.UseNumber]. A bad id gives
// [ErrInvalidKey], no usable id [ErrNoMessageID].
func ExtractKey(channel string, parsed map[string]any) (Key, error) {
	if err := checkPart("channel", channel, maxChannelLen); err != nil {
		return Key{}, err
	}
	var candidates [3]any
	if md, ok := parsed["metadata"].(map[string]any); ok {
		candidates[0] = md["message_id"]
		candidates[1] = md[channel+"_message_id"]
	}
	candidates[2] = parsed["message_id"]
	for _, v := range candidates {
		id, ok, err := idString(v)
		if err != nil {
			return Key{}, err
		}
		if !ok {
			continue
		}
		k := Key{Channel: channel, MessageID: id}
		if err := k.Validate(); err != nil {
			return Key{}, err
		}
		return k, nil
	}
	return Key{}, ErrNoMessageID
}

// idString renders a message id value. ok is false for the falsy values that
// are skipped.
func idString(v any) (id string, ok bool, err error) {
	switch v := v.(type) {
	case nil:
		return "", false, nil
	case string:
		return v, v != "", nil
	case bool:
		if !v {
			return "", false, nil
		}
		return "", false, fmt.Errorf("%w: message id is the boolean true", ErrInvalidKey)
	case json.Number:
		s := v.String()
		if f, err := v.Float64(); err == nil && f == 0 {
			return "", false, nil
		}
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			if _, err := strconv.ParseUint(s, 10, 64); err != nil && !jsonscan.IsInteger(s) {
				return "", false, fmt.Errorf("%w: message id %q is not an integer", ErrInvalidKey, s)
			}
		}
		return s, true, nil
	case float32:
		return floatID(float64(v))
	case float64:
		return floatID(v)
	}
	var tmp [20]byte
	if b, ok := canon.AppendInteger(tmp[:0], v); ok {
		if string(b) == "0" {
			return "", false, nil
		}
		return string(b), true, nil
	}
	return "", false, fmt.Errorf("%w: message id has unsupported type %T", ErrInvalidKey, v)
}

func floatID(f float64) (string, bool, error) {
	switch {
	case f == 0:
		return "", false, nil
	case math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f):
		return "", false, fmt.Errorf("%w: message id %v is not an integer", ErrInvalidKey, f)
	case math.Abs(f) > maxExactFloat:
		return "", false, fmt.Errorf("%w: message id %.0f is beyond 2^53 in a float64 and may have lost digits; decode JSON with UseNumber", ErrInvalidKey, f)
	}
	return strconv.FormatInt(int64(f), 10), true, nil
}
