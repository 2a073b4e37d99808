package platform

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// checkNumberID checks numberID against [dedupe.ExtractKey] given the same
// number as a [json.Number]: a preset must read a numeric id as the root
// package does, although it cannot call its unexported helper.
func checkNumberID(t *testing.T, s string) {
	t.Helper()
	ok, integer := numberID(s)
	k, err := dedupe.ExtractKey("c", map[string]any{"message_id": json.Number(s)})
	switch {
	case errors.Is(err, dedupe.ErrNoMessageID):
		require.False(t, ok, "numberID(%q): ExtractKey sees no id", s)
		require.True(t, integer, "numberID(%q): ExtractKey sees no id", s)
	case errors.Is(err, dedupe.ErrInvalidKey):
		require.False(t, integer, "numberID(%q): ExtractKey finds %v", s, err)
	default:
		require.NoError(t, err)
		require.True(t, ok && integer, "numberID(%q) = %t, %t; ExtractKey finds %v", s, ok, integer, k)
		require.Equal(t, s, k.MessageID)
	}
}

func TestNumberIDAsExtractKey(t *testing.T) {
	for _, s := range []string{
		"0", "-0", "0.0", "0e5", "-0.000E-3", "1", "-1", "42", "1.5", "1e3", "1.0", "1E400", "-1e400",
		"9007199254740993", "18446744073709551615", "18446744073709551616", "-9223372036854775809",
		"123456789012345678901234",
	} {
		checkNumberID(t, s)
	}
}

// FuzzNumberID compares numberID with [dedupe.ExtractKey] on every JSON
// number literal.
func FuzzNumberID(f *testing.F) {
	for _, s := range []string{"0", "-0", "1", "1.5", "1e3", "-12", "0.0e1", "123456789012345678901234"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n json.Number
		if len(s) > 64 || json.Unmarshal([]byte(s), &n) != nil || n.String() != s {
			return // not a JSON number literal, or longer than a key's id
		}
		checkNumberID(t, s)
	})
}

// fieldSets are the member names the presets look for, at every level.
var fieldSets = [][]string{
	telegramFields[:], slackFields[:], discordFields[:], oneBotFields[:], qqFields[:], qqValidationFields[:],
	feishuFields[:], feishuHeaderFields[:], feishuEventFields[:], feishuMessageFields[:],
	feishuEncryptFields[:], feishuTokenFields[:], feishuHeaderToken[:],
}

// errText returns err's text, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkAsLegacy checks that the presets' reading of body, on the scanner of
// internal/jsonscan, is the former scanner's: the same members found (at
// the top level, in the objects below, in the strings decoded), and the
// same errors.
func checkAsLegacy(t *testing.T, body []byte) {
	t.Helper()
	for _, names := range fieldSets {
		got, want := make([][]byte, len(names)), make([][]byte, len(names))
		err := decodeBody("p", body, names, got)
		wantErr := legacyDecodeBody("p", body, names, want)
		require.Equal(t, errText(wantErr), errText(err), "%q %v", body, names)
		require.Equal(t, errors.Is(wantErr, dedupe.ErrInvalidKey), errors.Is(err, dedupe.ErrInvalidKey))
		require.Equal(t, want, got, "%q %v", body, names)
		for i, raw := range got {
			checkValueAsLegacy(t, names[i], raw)
		}
	}
}

// checkValueAsLegacy compares the readings of a member's raw value: as a
// string, and as an object holding any of the preset's members.
func checkValueAsLegacy(t *testing.T, field string, raw []byte) {
	t.Helper()
	switch {
	case raw == nil:
		return
	case raw[0] == '"':
		s, err := unquote(raw)
		wantS, wantErr := legacyUnquote(raw)
		require.Equal(t, errText(wantErr), errText(err), "%q", raw)
		require.Equal(t, wantS, s, "%q", raw)
		return
	}
	for _, names := range fieldSets {
		got, want := make([][]byte, len(names)), make([][]byte, len(names))
		err := object("p", field, raw, names, got)
		wantErr := legacyObject("p", field, raw, names, want)
		require.Equal(t, errText(wantErr), errText(err), "%q %v", raw, names)
		require.Equal(t, want, got, "%q %v", raw, names)
	}
}

// TestFixturesAsLegacy runs checkAsLegacy on the recorded deliveries of
// testdata and on the bodies where the two scanners could part.
func TestFixturesAsLegacy(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		body, err := os.ReadFile(f)
		require.NoError(t, err)
		checkAsLegacy(t, body)
	}
	for _, body := range legacySeeds() {
		checkAsLegacy(t, []byte(body))
	}
}

func legacySeeds() []string {
	deep := strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1)
	return []string{
		``, ` `, `null`, ` null `, `[]`, `"x"`, `1`, `true`, `{}`, `{"update_id":1} x`, `{"update_id":1,}`,
		`{"update_id":4,"UPDATE_ID":5}`, `{"update_id":4,"update_id":5}`, `{"update_\u0069d":4,"update_id":5}`,
		`{"type":1,"type":2,"id":3}`, `{"id":3,"type":1,"type":2,"id":4}`, "{\"update_id\":\"\xff\\u0031\"}",
		`{"update_id":"\ud800"}`, `{"update_id":"\ud800\ud800"}`, `{"update_id":"\ud83d\ude00"}`, `{"update_i\ud800d":1}`,
		`{"event":{"message":{"message_id":"om_1","message_id":"om_2"}},"header":[1]}`, `{"d":"x","op":13}`,
		`{"x":` + deep + `,"update_id":1}`, `{"x":[` + deep + `],"update_id":1}`, `{"update_id":1e3,"id":-0}`,
		`{"schema":"2.0","header":{"event_id":"e","token":"t"},"event":{"type":"message","open_message_id":"om"}}`,
		"\t{ \"update_id\" : 12 }\n", `{"update_id":1}}`, `{"update_id"}`, `{"a":[1,2,{"b":"}"}],"update_id":"\""}`,
	}
}

// FuzzMembersAsLegacy runs checkAsLegacy on any body.
func FuzzMembersAsLegacy(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, file := range files {
		if body, err := os.ReadFile(file); err == nil {
			f.Add(body)
		}
	}
	for _, s := range legacySeeds() {
		if len(s) < 1000 {
			f.Add([]byte(s))
		}
	}
	f.Fuzz(checkAsLegacy)
}
