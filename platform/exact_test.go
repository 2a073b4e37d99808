package platform_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
)

// TestExactKeys runs the bodies of the issue that mapped two raw ids to one
// key, and their neighbours: member names that differ only in case, ids that
// are not UTF-8, and OneBot bot ids that could shift the key's separator.
func TestExactKeys(t *testing.T) {
	selfID := http.Header{"X-Self-Id": {"10001"}}
	badSelfID := http.Header{"X-Self-Id": {"1:2"}}
	for _, tc := range []struct {
		name   string
		preset platform.Preset
		body   string
		header http.Header
		want   string // the MessageID, or "no id" / "invalid"
	}{
		{"upper-case twin ignored", platform.Telegram, `{"update_id":4,"UPDATE_ID":5}`, nil, "4"},
		{"upper-case alone is no id", platform.Telegram, `{"UPDATE_ID":5}`, nil, noID},
		{"mixed case is no id", platform.Telegram, `{"Update_Id":5}`, nil, noID},
		{"escaped name is the name", platform.Telegram, `{"update\u005fid":7}`, nil, "7"},
		{"twice is ambiguous", platform.Telegram, `{"update_id":4,"update_id":5}`, nil, invalid},
		{"discord ID is not id", platform.Discord, `{"type":2,"ID":"123"}`, nil, noID},
		{"discord TYPE is not type", platform.Discord, `{"TYPE":1,"id":"9"}`, nil, "9"},
		{"raw 0xff", platform.Telegram, "{\"update_id\":\"\xff\\u0031\"}", nil, invalid},
		{"raw 0xfe", platform.Telegram, "{\"update_id\":\"\xfe\\u0031\"}", nil, invalid},
		{"lone high surrogate", platform.Telegram, `{"update_id":"\ud800"}`, nil, invalid},
		{"lone low surrogate", platform.Telegram, `{"update_id":"\udc00"}`, nil, invalid},
		{"high surrogate then text", platform.Telegram, `{"update_id":"\ud800x1"}`, nil, invalid},
		{"two high surrogates", platform.Telegram, `{"update_id":"\ud800\ud800"}`, nil, invalid},
		{"surrogate pair", platform.Telegram, `{"update_id":"\ud800\udc00"}`, nil, "\U00010000"},
		{"a real U+FFFD stays", platform.Telegram, `{"update_id":"\ufffd1"}`, nil, "\ufffd1"},
		{"onebot self_id with colon", platform.OneBot, `{"post_type":"message","self_id":"1:2","message_id":3}`, nil, invalid},
		{"onebot message_id with colon", platform.OneBot, `{"post_type":"message","self_id":1,"message_id":"2:3"}`, nil, "1:2:3"},
		{"onebot self_id of digits", platform.OneBot, `{"post_type":"message","self_id":"10001","message_id":3}`, nil, "10001:3"},
		{"onebot self_id not digits", platform.OneBot, `{"post_type":"message","self_id":"bot","message_id":3}`, nil, invalid},
		{"onebot X-Self-ID", platform.OneBot, `{"post_type":"message","message_id":3}`, selfID, "10001:3"},
		{"onebot body wins", platform.OneBot, `{"post_type":"message","self_id":7,"message_id":3}`, selfID, "7:3"},
		{"onebot X-Self-ID with colon", platform.OneBot, `{"post_type":"message","message_id":3}`, badSelfID, invalid},
		{"onebot no bot", platform.OneBot, `{"post_type":"message","message_id":3}`, nil, noID},
		{"onebot POST_TYPE", platform.OneBot, `{"POST_TYPE":"message","self_id":1,"message_id":3}`, nil, noID},
		{"feishu HEADER ignored", platform.Feishu, `{"schema":"2.0","HEADER":{"event_id":"x"},"header":{"event_id":"e1"}}`, nil, "e1"},
		{"feishu Message_Id ignored", platform.Feishu, `{"schema":"2.0","header":{"event_id":"e1","event_type":"im.message.receive_v1"},"event":{"message":{"Message_Id":"om_1"}}}`, nil, noID},
		{"qq ID ignored", platform.QQ, `{"op":0,"ID":"E1"}`, nil, noID},
		{"slack EVENT_ID ignored", platform.Slack, `{"type":"event_callback","EVENT_ID":"Ev1"}`, nil, noID},
		{"slack payload trigger_id twice", platform.Slack, `payload=%7B%22trigger_id%22%3A%221%22%2C%22trigger_id%22%3A%222%22%7D`, nil, invalid},
		{"slack payload TRIGGER_ID ignored", platform.Slack, `payload=%7B%22TRIGGER_ID%22%3A%221%22%7D`, nil, noID},
		{"slack Payload is not payload", platform.Slack, `Payload=%7B%22trigger_id%22%3A%221%22%7D&command=x&trigger_id=2`, nil, "2"},
		{"slack escaped form name is the name", platform.Slack, `comm%61nd=x&trigger%5Fid=3`, nil, "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := tc.preset.Extract([]byte(tc.body), tc.header)
			switch tc.want {
			case noID:
				require.ErrorIs(t, err, dedupe.ErrNoMessageID)
				require.NotErrorIs(t, err, dedupe.ErrInvalidKey)
			case invalid:
				require.ErrorIs(t, err, dedupe.ErrInvalidKey)
				require.NotErrorIs(t, err, dedupe.ErrNoMessageID, "an invalid id is refused, not served without deduplication")
			default:
				require.NoError(t, err)
				assert.Equal(t, tc.want, k.MessageID)
			}
		})
	}
}

// TestNoTwoRawIDsOneKey checks the collisions of the issue pairwise: the two
// bodies of each pair never give one key.
func TestNoTwoRawIDsOneKey(t *testing.T) {
	for _, pair := range []struct {
		preset platform.Preset
		a, b   string
	}{
		{platform.Telegram, `{"update_id":4,"UPDATE_ID":5}`, `{"update_id":5}`},
		{platform.Discord, `{"type":2,"ID":"123"}`, `{"type":2,"id":"123"}`},
		{platform.Telegram, "{\"update_id\":\"\xff\\u0031\"}", "{\"update_id\":\"\xfe\\u0031\"}"},
		{platform.OneBot, `{"post_type":"message","self_id":"1:2","message_id":3}`, `{"post_type":"message","self_id":1,"message_id":"2:3"}`},
	} {
		ka, errA := pair.preset.Extract([]byte(pair.a), nil)
		kb, errB := pair.preset.Extract([]byte(pair.b), nil)
		if errA == nil && errB == nil {
			assert.NotEqual(t, ka, kb, "%s and %s", pair.a, pair.b)
		}
	}
}

// FuzzPresetExactKeys compares every preset with a reference decoder built on
// encoding/json's map decoding, whose keys match case-sensitively: where the
// reference finds an id, the preset must find the same one, and where it
// finds none, so must the preset. Bodies the reference cannot judge (a
// member twice, a string encoding/json repaired with U+FFFD) are left to the
// invariants of FuzzPresetExtract.
func FuzzPresetExactKeys(f *testing.F) {
	for _, s := range []string{
		`{"update_id":4,"UPDATE_ID":5}`, `{"type":2,"ID":"123"}`, `{"type":2,"id":"12"}`,
		"{\"update_id\":\"\xff\\u0031\"}", `{"update_id":"\ud800"}`, `{"update_id":"\ud83d\ude00"}`,
		`{"post_type":"message","self_id":"1:2","message_id":3}`, `{"post_type":"message","self_id":1,"message_id":"2:3"}`,
		`{"schema":"2.0","header":{"event_id":"e1","event_type":"im.message.receive_v1"},"event":{"message":{"message_id":"om_1"}}}`,
		`{"uuid":"u1","event":{"type":"message","open_message_id":"om_2"}}`, `{"op":0,"id":"E1"}`, `{"op":13,"d":{}}`,
		`{"type":"event_callback","event_id":"Ev1"}`, `{"type":"url_verification"}`, `{"update_id":"a\"b\\\/c\u00e9"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range platform.Presets() {
			want, class := reference(p.Name, body)
			if class == refUnknown {
				continue
			}
			k, err := p.Extract(body, nil)
			switch class {
			case refID:
				if verr := (dedupe.Key{Channel: p.Name, MessageID: want}).Validate(); verr != nil {
					require.ErrorIs(t, err, dedupe.ErrInvalidKey, "%s %q: want ErrInvalidKey (%v), got %v", p.Name, body, verr, k)
					continue
				}
				require.NoError(t, err, "%s %q: reference finds %q", p.Name, body, want)
				require.Equal(t, want, k.MessageID, "%s %q: reference finds %q, preset", p.Name, body, want)
			case refNoID:
				require.ErrorIs(t, err, dedupe.ErrNoMessageID, "%s %q: reference finds no id, preset %v", p.Name, body, k)
			case refInvalid:
				require.ErrorIs(t, err, dedupe.ErrInvalidKey, "%s %q: reference finds an invalid id, preset %v", p.Name, body, k)
			}
		}
	})
}

// Outcomes of the reference decoder.
const (
	refUnknown = iota
	refID
	refNoID
	refInvalid
)

// refObject decodes an object the reference way: a map, whose keys match
// exactly. ok is false for anything else, or for an object with a key twice.
func refObject(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil || hasDuplicateKey(raw) {
		return nil, false
	}
	return m, true
}

// hasDuplicateKey reports whether the top level of the object raw has a key
// twice.
func hasDuplicateKey(raw json.RawMessage) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return true
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return true
		}
		key, _ := tok.(string)
		if seen[key] || strings.ContainsRune(key, utf8.RuneError) {
			return true
		}
		seen[key] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return true
		}
	}
	return false
}

// refString decodes a string member; ok is false for another kind or when
// encoding/json may have repaired it.
func refString(raw json.RawMessage) (string, bool) {
	var s string
	if raw == nil || string(raw) == "null" {
		return "", true
	}
	if json.Unmarshal(raw, &s) != nil || strings.ContainsRune(s, utf8.RuneError) {
		return "", false
	}
	return s, true
}

// refID applies the id rules to raw, the way dedupe.ExtractKey reads a
// json.Number or a string.
func refIDOf(raw json.RawMessage) (string, int) {
	if raw == nil || string(raw) == "null" || string(raw) == "false" {
		return "", refNoID
	}
	switch raw[0] {
	case '"':
		s, ok := refString(raw)
		switch {
		case !ok:
			return "", refUnknown
		case s == "":
			return "", refNoID
		}
		return s, refID
	case 't', '{', '[':
		return "", refInvalid
	}
	k, err := dedupe.ExtractKey("c", map[string]any{"message_id": json.Number(raw)})
	switch {
	case errors.Is(err, dedupe.ErrNoMessageID):
		return "", refNoID
	case err != nil:
		return "", refInvalid
	}
	return k.MessageID, refID
}
