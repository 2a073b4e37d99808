package dedupe_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeyString(t *testing.T) {
	assert.Equal(t, "telegram:123", dedupe.Key{Channel: "telegram", MessageID: "123"}.String())
	assert.Equal(t, "web:a:b", dedupe.Key{Channel: "web", MessageID: "a:b"}.String())
}

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    dedupe.Key
		wantErr bool
	}{
		{in: "telegram:123", want: dedupe.Key{Channel: "telegram", MessageID: "123"}},
		{in: "web:a:b", want: dedupe.Key{Channel: "web", MessageID: "a:b"}},
		{in: "web:a:b:c", want: dedupe.Key{Channel: "web", MessageID: "a:b:c"}},
		{in: "qq:消息", want: dedupe.Key{Channel: "qq", MessageID: "消息"}},
		{in: "nocolon", wantErr: true},
		{in: ":123", wantErr: true},
		{in: "telegram:", wantErr: true},
		{in: "", wantErr: true},
		{in: "a:b\x00", wantErr: true},
		{in: "a:\xff", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			k, err := dedupe.ParseKey(tc.in)
			if tc.wantErr {
				require.ErrorIs(t, err, dedupe.ErrInvalidKey)
				assert.True(t, strings.HasPrefix(err.Error(), "dedupe: "), err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, k)
			assert.Equal(t, tc.in, k.String(), "round trip")
		})
	}
}

func TestKeyValidate(t *testing.T) {
	valid := []dedupe.Key{
		{Channel: "telegram", MessageID: "1"},
		{Channel: "web", MessageID: "a:b"},
		{Channel: strings.Repeat("c", 64), MessageID: strings.Repeat("m", 256)},
		{Channel: "飞书", MessageID: "om_dc13264520392913993dd051dba21dcf"},
	}
	for _, k := range valid {
		assert.NoError(t, k.Validate(), "%q", k)
	}
	invalid := []dedupe.Key{
		{},
		{Channel: "x"},
		{MessageID: "1"},
		{Channel: "a:b", MessageID: "1"},
		{Channel: "x", MessageID: "tab\there"},
		{Channel: "x", MessageID: "del\x7f"},
		{Channel: "x", MessageID: "c1\u0085"},
		{Channel: "x", MessageID: "\xc3"},
		{Channel: strings.Repeat("c", 64+1), MessageID: "1"},
		{Channel: "x", MessageID: strings.Repeat("m", 256+1)},
	}
	for _, k := range invalid {
		assert.ErrorIs(t, k.Validate(), dedupe.ErrInvalidKey, "%q", k)
	}
}

func decodeNumber(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m))
	return m
}

func TestExtractKey(t *testing.T) {
	md := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		channel string
		parsed  map[string]any
		want    string // message id
		err     error
	}{
		{"metadata message_id first", "qq", map[string]any{
			"metadata": md("message_id", "m1", "qq_message_id", "m2"), "message_id": "m3"}, "m1", nil},
		{"channel-specific metadata second", "qq", map[string]any{
			"metadata": md("qq_message_id", "m2"), "message_id": "m3"}, "m2", nil},
		{"top-level last", "qq", map[string]any{"message_id": "m3"}, "m3", nil},
		{"other channel's metadata ignored", "qq", map[string]any{
			"metadata": md("telegram_message_id", "t1"), "message_id": "m3"}, "m3", nil},
		{"falsy values skipped", "qq", map[string]any{
			"metadata": md("message_id", "", "qq_message_id", 0), "message_id": 42}, "42", nil},
		{"nil and false skipped", "qq", map[string]any{
			"metadata": md("message_id", nil, "qq_message_id", false), "message_id": "x"}, "x", nil},
		{"float zero skipped", "qq", map[string]any{"metadata": md("message_id", 0.0), "message_id": "y"}, "y", nil},
		{"json.Number zero skipped", "qq", map[string]any{"metadata": md("message_id", json.Number("0")), "message_id": "y"}, "y", nil},
		{"metadata not a map", "qq", map[string]any{"metadata": "oops", "message_id": "z"}, "z", nil},
		{"int", "telegram", map[string]any{"message_id": 123}, "123", nil},
		{"int64", "telegram", map[string]any{"message_id": int64(-5)}, "-5", nil},
		{"uint64 max", "discord", map[string]any{"message_id": uint64(18446744073709551615)}, "18446744073709551615", nil},
		{"json.Number snowflake", "discord", map[string]any{"message_id": json.Number("1187654321098765432")}, "1187654321098765432", nil},
		{"integral float", "telegram", map[string]any{"message_id": float64(123456)}, "123456", nil},
		{"float at 2^53", "telegram", map[string]any{"message_id": float64(1 << 53)}, "9007199254740992", nil},
		{"float beyond 2^53", "discord", map[string]any{"message_id": float64(1187654321098765432)}, "", dedupe.ErrInvalidKey},
		{"fractional float", "telegram", map[string]any{"message_id": 1.5}, "", dedupe.ErrInvalidKey},
		{"fractional json.Number", "telegram", map[string]any{"message_id": json.Number("1.5")}, "", dedupe.ErrInvalidKey},
		{"true", "telegram", map[string]any{"message_id": true}, "", dedupe.ErrInvalidKey},
		{"object", "telegram", map[string]any{"message_id": map[string]any{}}, "", dedupe.ErrInvalidKey},
		{"id with control char", "telegram", map[string]any{"message_id": "a\nb"}, "", dedupe.ErrInvalidKey},
		{"no id", "telegram", map[string]any{"text": "hi"}, "", dedupe.ErrNoMessageID},
		{"only falsy ids", "telegram", map[string]any{"metadata": md("message_id", ""), "message_id": 0}, "", dedupe.ErrNoMessageID},
		{"nil map", "telegram", nil, "", dedupe.ErrNoMessageID},
		{"empty channel", "", map[string]any{"message_id": "1"}, "", dedupe.ErrInvalidKey},
		{"channel with colon", "a:b", map[string]any{"message_id": "1"}, "", dedupe.ErrInvalidKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := dedupe.ExtractKey(tc.channel, tc.parsed)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				assert.Equal(t, dedupe.Key{}, k)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, dedupe.Key{Channel: tc.channel, MessageID: tc.want}, k)
		})
	}
}

func TestExtractKeyFromJSON(t *testing.T) {
	body := `{"message_id": 1187654321098765432, "metadata": {"discord_message_id": 0}}`
	// Decoded with UseNumber, the snowflake is exact.
	k, err := dedupe.ExtractKey("discord", decodeNumber(t, body))
	require.NoError(t, err)
	assert.Equal(t, "1187654321098765432", k.MessageID)

	// Decoded plainly, it arrives as a float64 that lost digits: refused.
	var plain map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &plain))
	_, err = dedupe.ExtractKey("discord", plain)
	require.ErrorIs(t, err, dedupe.ErrInvalidKey)
	assert.Contains(t, err.Error(), "UseNumber")
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"telegram:1", "web:a:b", ":", "a:", ":b", "", "x\x00:y", "qq:消息"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := dedupe.ParseKey(s)
		if err != nil {
			require.ErrorIs(t, err, dedupe.ErrInvalidKey, "ParseKey(%q)", s)
			return
		}
		require.Equal(t, s, k.String(), "ParseKey(%q).String()", s)
		require.NoError(t, k.Validate(), "ParseKey(%q) returned an invalid key", s)
		require.NotContains(t, k.Channel, ":", "channel holds ':'")
	})
}

func TestNewClaimTokens(t *testing.T) {
	seen := map[string]bool{}
	for range 3 * 256 { // several slabs
		c := dedupe.NewClaim(key1)
		require.NoError(t, c.Validate())
		require.Len(t, c.Token, 32)
		for _, r := range c.Token {
			require.Contains(t, "0123456789abcdef", string(r))
		}
		require.False(t, seen[c.Token], "token %s made twice", c.Token)
		seen[c.Token] = true
	}
	allocs := testing.AllocsPerRun(1000, func() { _ = dedupe.NewClaim(key1) })
	assert.Less(t, allocs, 0.1, "a token costs a share of a slab")
}
