package idempotency

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseIdempotencyKey: the sf-strings of the draft's section 2.1 are accepted,
// unescaped, with parameters ignored; everything else is refused with
// ErrMalformedKey.
func TestParseIdempotencyKey(t *testing.T) {
	valid := map[string]string{
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`: "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`  "abc"  `:                              "abc",
		`"a\"b"`:                                 `a"b`,
		`"a\\b"`:                                 `a\b`,
		`"with space ~!"`:                        "with space ~!",
		`"abc";p=1`:                              "abc",
		`"abc"; p`:                               "abc",
		`"abc";a=?0;b=:aGVsbG8=:;c=tok/x:y;d=-1.5;e="x";f=@1700000000;g=%"caf%c3%a9";*h=1`: "abc",
		`"` + strings.Repeat("k", MaxKeyLen) + `"`:                                         strings.Repeat("k", MaxKeyLen),
	}
	for field, want := range valid {
		got, err := ParseKey(field)
		if assert.NoError(t, err, field) {
			assert.Equal(t, want, got, field)
		}
	}
	invalid := []string{
		``, `   `, `abc`, `8e03978e-40d5-43e8-bc93-6894a57f9324`, `""`, `"abc`, `"a\x"`, `"a\`,
		`"a" "b"`, `"a","b"`, `"a" ;p=1`, `"a";P=1`, `"a";`, `"a";p=`, `"a";p=1.2345`,
		`"a";p=1.`, `"a";p=1234567890123456`, `"a";p=:abc`, `"a";p=:a b:`, `"a";p=?2`,
		"\"a\";p=%\"é\"", `"a";p=%"%4"`, `"a";p=%"abc`, `"a";p=@`, `"a";p=$`, "\"é\"",
		"\"a\tb\"", "\"a\x00\"", `"` + strings.Repeat("k", MaxKeyLen+1) + `"`, `:aGVsbG8=:`, `?1`,
	}
	for _, field := range invalid {
		_, err := ParseKey(field)
		assert.ErrorIs(t, err, ErrMalformedKey, "%q", field)
	}
}

// TestParseBareKey: WithBareKeys also takes unquoted keys of visible ASCII,
// and still parses quoted ones as sf-strings.
func TestParseBareKey(t *testing.T) {
	for field, want := range map[string]string{
		`8e03978e-40d5`: "8e03978e-40d5",
		` abc `:         "abc",
		`"q\"x"`:        `q"x`,
	} {
		got, err := parseBareKey(field)
		require.NoError(t, err, field)
		assert.Equal(t, want, got)
	}
	for _, field := range []string{``, `a b`, `a,b`, `a;b`, `a"b`, `a\b`, "é", `"unterminated`, strings.Repeat("k", MaxKeyLen+1)} {
		_, err := parseBareKey(field)
		assert.ErrorIs(t, err, ErrMalformedKey, "%q", field)
	}
}

// FuzzParseKey: ParseKey never panics; a key it accepts is 1 to MaxKeyLen
// printable ASCII characters, and quoting it again parses to itself.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b";p=1`, `"x";a=?1;b=:AA==:;c=%"%c3%a9"`, `abc`, `"a";p=1.5`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, field string) {
		key, err := ParseKey(field)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformedKey)
			return
		}
		require.NotEmpty(t, key)
		require.LessOrEqual(t, len(key), MaxKeyLen)
		for i := 0; i < len(key); i++ {
			require.True(t, key[i] >= 0x20 && key[i] <= 0x7e)
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		again, err := ParseKey(quoted)
		require.NoError(t, err)
		require.Equal(t, key, again)
	})
}
