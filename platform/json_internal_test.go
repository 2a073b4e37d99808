package platform

import (
	"encoding/json"
	"errors"
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
