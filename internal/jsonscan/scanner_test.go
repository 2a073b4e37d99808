package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonDepth is encoding/json's nesting bound, with which Valid must agree
// with json.Valid.
const jsonDepth = 10000

// TestValid checks Valid against encoding/json on the edges of the grammar.
func TestValid(t *testing.T) {
	valid := []string{
		`null`, `true`, ` false `, `0`, `-0`, `1.5e-3`, `-12E+2`, `1e400`, `""`, `"\u00e9\n\t\\\/\b\f\r\""`,
		`[]`, `{}`, `[1,[2,[3]]]`, `{"a":{"b":[{"c":null}]}}`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800"`,
		`{"a":1,"a":2}`, "\t\r\n [ 1 , 2 ] \n", "\"\xff\xfe\"", "{\"\xff\":1}", `{"":[[[[]]]]}`, `"\uABCD\uabcd"`,
	}
	invalid := []string{
		``, ` `, `nul`, `tru`, `nulll`, `01`, `1.`, `.5`, `1e`, `1e+`, `-`, `+1`, `"abc`, `"a` + "\n" + `"`, `"\x"`,
		`"\u12"`, `"\u12G4"`, `[1,]`, `[1 2]`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1,}`, `{"a":1} {}`, `[`, `]`, `NaN`,
		`{"a" 1}`, `{,}`, `[,1]`, "\x00", "[\x00]", "\ufeff{}", `"\`, `"\u`, `{"a":1`, `[1,`, "\v1", `{"a":1]`, `[1}`,
	}
	for _, s := range valid {
		require.True(t, json.Valid([]byte(s)), "%q: the test is wrong", s)
		assert.True(t, Valid(s, jsonDepth), "%q: refused, encoding/json accepts it", s)
		assert.True(t, Valid([]byte(s), jsonDepth), "%q as bytes: refused", s)
	}
	for _, s := range invalid {
		require.False(t, json.Valid([]byte(s)), "%q: the test is wrong", s)
		assert.False(t, Valid(s, jsonDepth), "%q: accepted, encoding/json refuses it", s)
	}
}

// TestSkipDepth checks the nesting bound: maxDepth containers, the value's
// own included, and not one more, whatever is inside the innermost.
func TestSkipDepth(t *testing.T) {
	nest := func(n int, inner string) string {
		var b strings.Builder
		for i := range n {
			if i%2 == 0 {
				b.WriteString(`{"k":`)
			} else {
				b.WriteString(`[`)
			}
		}
		b.WriteString(inner)
		for i := n - 1; i >= 0; i-- {
			if i%2 == 0 {
				b.WriteString(`}`)
			} else {
				b.WriteString(`]`)
			}
		}
		return b.String()
	}
	for _, inner := range []string{`1`, `[]`, `{}`} {
		n := 3
		if inner != "1" {
			n = 2 // the empty container is the third
		}
		assert.True(t, Valid(nest(n, inner), 3), "%s in %d", inner, n)
		assert.False(t, Valid(nest(n, inner), 2), "%s in %d", inner, n)
	}
	assert.True(t, Valid(`1`, 0))
	assert.False(t, Valid(`[]`, 0))
	for _, n := range []int{jsonDepth - 1, jsonDepth, jsonDepth + 1} {
		s := nest(n, "0")
		assert.Equal(t, json.Valid([]byte(s)), Valid(s, jsonDepth), "%d deep", n)
	}
}

// TestSkip checks that Skip returns the text of one value and leaves the
// offset after it.
func TestSkip(t *testing.T) {
	s := NewScanner(` {"a":[1,{"b":"}"}],"c":"\""} , 2`)
	v, ok := s.Skip(jsonDepth)
	require.True(t, ok)
	assert.Equal(t, `{"a":[1,{"b":"}"}],"c":"\""}`, v)
	more, ok := s.Next(']')
	assert.True(t, more && ok)
	v, ok = s.Skip(jsonDepth)
	assert.True(t, ok)
	assert.Equal(t, "2", v)
	assert.True(t, s.AtEnd())
}

// TestObject walks an object with Open, Quoted, Colon and Next, as the
// callers do.
func TestObject(t *testing.T) {
	s := NewScanner([]byte(`{ "a\u0062" : 1 , "c":"x" }`))
	require.Equal(t, byte('{'), s.Peek())
	require.False(t, s.Open())
	require.Equal(t, byte('"'), s.Peek())
	name, escaped, ok := s.Quoted()
	require.True(t, ok && s.Colon())
	assert.True(t, escaped)
	assert.Equal(t, `a\u0062`, string(name))
	got, flaw := AppendUnquote(nil, name)
	assert.Equal(t, "ab", string(got))
	assert.Equal(t, NoFlaw, flaw)
	v, ok := s.Skip(0)
	assert.True(t, ok)
	assert.Equal(t, "1", string(v))
	more, ok := s.Next('}')
	assert.True(t, more && ok)
	require.Equal(t, byte('"'), s.Peek())
	name, escaped, ok = s.Quoted()
	assert.True(t, ok && !escaped && s.Colon())
	assert.Equal(t, "c", string(name))
	v, _ = s.Skip(0)
	assert.Equal(t, `"x"`, string(v))
	more, ok = s.Next('}')
	assert.True(t, !more && ok)
	assert.True(t, s.AtEnd())

	s.Reset([]byte(`{}`))
	s.Peek()
	assert.True(t, s.Open(), "empty object")
	assert.True(t, s.AtEnd())
}

// TestAppendUnquote checks the decoding and the flaws it reports.
func TestAppendUnquote(t *testing.T) {
	for _, tt := range []struct {
		inner, want string
		flaw        Flaw
	}{
		{`plain`, "plain", NoFlaw},
		{`\"\\\/\b\f\n\r\t`, "\"\\/\b\f\n\r\t", NoFlaw},
		{`\u00e9\u4E16`, "é世", NoFlaw},
		{`\ud83d\ude00`, "😀", NoFlaw},
		{`\ud800\udc00`, "\U00010000", NoFlaw},
		{`\ufffd1`, "\ufffd1", NoFlaw},
		{"é世😀", "é世😀", NoFlaw},
		{`\ud800`, "\ufffd", LoneSurrogate},
		{`\udc00`, "\ufffd", LoneSurrogate},
		{`\ud800x1`, "\ufffdx1", LoneSurrogate},
		{`\ud800\ud800`, "\ufffd\ufffd", LoneSurrogate},
		{`\ud800\u0041`, "\ufffdA", LoneSurrogate},
		{`\ud83d\ude00\udc00`, "😀\ufffd", LoneSurrogate},
		{"\xff\\u0031", "\xff1", InvalidUTF8},
		{"\xe4\xb8", "\xe4\xb8", InvalidUTF8},
		{"a\xe4\xb8\x96\xed\xa0\x80", "a世\xed\xa0\x80", InvalidUTF8},
		{"\xff\\ud800", "\xff\ufffd", InvalidUTF8},
		{"\\ud800\xff", "\ufffd\xff", LoneSurrogate},
		{`\x`, `\x`, InvalidUTF8},
		{`\u12`, `\u12`, InvalidUTF8},
	} {
		got, flaw := AppendUnquote([]byte("pre:"), tt.inner)
		assert.Equal(t, "pre:"+tt.want, string(got), "%q", tt.inner)
		assert.Equal(t, tt.flaw, flaw, "%q", tt.inner)
		gotB, flawB := AppendUnquote(nil, []byte(tt.inner))
		assert.Equal(t, tt.want, string(gotB), "%q as bytes", tt.inner)
		assert.Equal(t, tt.flaw, flawB, "%q as bytes", tt.inner)
	}
}

// TestNumbers checks IsNumber against encoding/json, and IsInteger.
func TestNumbers(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-12", "1.5", "1e3", "1E+3", "1e-3", "0.0", "123456789012345678901234"} {
		assert.True(t, IsNumber(s), s)
	}
	for _, s := range []string{"", "-", "+1", "01", "1.", ".1", "1e", "0x1", " 1", "1 ", "NaN", "1.5.2"} {
		assert.False(t, IsNumber(s), s)
	}
	for _, s := range []string{"0", "-0", "007", "-12", "18446744073709551616"} {
		assert.True(t, IsInteger(s), s)
	}
	for _, s := range []string{"", "-", "--1", "1-", "1.0", "1e3", "+1", " 1", "a"} {
		assert.False(t, IsInteger(s), s)
	}
}

// TestNoAllocs checks that reading does not allocate.
func TestNoAllocs(t *testing.T) {
	text := []byte(`{"update_id":123,"message":{"text":"h\u00e9llo","entities":[{"type":"bot_command"}],"n":1.5e3}}`)
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		require.True(t, Valid(text, jsonDepth), "invalid")
		buf, _ = AppendUnquote(buf[:0], `h\u00e9llo \ud83d\ude00`)
	})
	assert.Zero(t, allocs)
}

// FuzzValid checks that Valid accepts exactly what encoding/json accepts,
// with encoding/json's nesting bound, for strings and for bytes.
func FuzzValid(f *testing.F) {
	for _, s := range []string{
		``, `{"a":[1,{"b":"}"}],"c":"\""}`, `[1,]`, "\"\xff\"", `"\ud800"`, `1e400`, `-0.0E+1`, `{"a" 1}`,
		strings.Repeat("[", 100) + strings.Repeat("]", 100), `{"a":1}}`, "\x00", `"\u12G4"`, `[tru]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := json.Valid([]byte(s))
		require.Equal(t, want, Valid(s, jsonDepth), "%q: Valid differs from encoding/json", s)
		require.Equal(t, want, Valid([]byte(s), jsonDepth), "%q as bytes: Valid differs from encoding/json", s)
	})
}

// FuzzAppendUnquote checks the decoding of every valid string literal
// against encoding/json: the same text where the string has no flaw or only
// lone surrogates (which both decode as U+FFFD) for a literal that is
// UTF-8, and a flaw for one that is not.
func FuzzAppendUnquote(f *testing.F) {
	for _, s := range []string{
		`""`, `"a\u00e9\ud800"`, `"\ud83d\ude00"`, "\"\xff\\u0031\"", `"\ud800\ud800\udc00"`, `"\/\b"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		s := NewScanner(lit)
		if s.Peek() != '"' {
			return
		}
		inner, escaped, ok := s.Quoted()
		var want string
		jerr := json.Unmarshal([]byte(lit), &want)
		if !ok || !s.AtEnd() {
			require.Error(t, jerr, "%q: Quoted refuses a literal encoding/json decodes", lit)
			return
		}
		require.NoError(t, jerr, "%q: Quoted accepts a literal encoding/json refuses", lit)
		assert.Equal(t, strings.Contains(inner, `\`), escaped)
		got, flaw := AppendUnquote(nil, inner)
		if !utf8.ValidString(lit) {
			require.NotEqual(t, NoFlaw, flaw, "%q: bytes that are not UTF-8 pass unnoticed", lit)
			return
		}
		require.NotEqual(t, InvalidUTF8, flaw, "%q", lit)
		require.Equal(t, want, string(got), "%q", lit)
	})
}
