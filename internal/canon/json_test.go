package canon

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func jsonText(s string) ([]byte, bool) { return AppendJSONText(nil, s) }

// TestCanonicalJSON checks the JSON parser against encoding/json: the same
// documents are valid, and equal values give equal forms.
func TestCanonicalJSON(t *testing.T) {
	valid := []string{
		`null`, `true`, ` false `, `0`, `-0`, `1.5e-3`, `-12E+2`, `""`, `"\u00e9\n\t\\\/"`,
		`[]`, `{}`, `[1,[2,[3]]]`, `{"a":{"b":[{"c":null}]}}`, `"\ud83d\ude00"`, `"\ud800"`,
		`{"a":1,"a":2}`, "\t\r\n [ 1 , 2 ] \n",
	}
	invalid := []string{
		``, ` `, `nul`, `tru`, `01`, `1.`, `.5`, `1e`, `-`, `+1`, `"abc`, `"a` + "\n" + `"`, `"\x"`, `"\u12"`,
		`[1,]`, `[1 2]`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1,}`, `{"a":1} {}`, `[`, `]`, `NaN`,
	}
	for _, s := range valid {
		_, ok := jsonText(s)
		assert.True(t, ok, "%q: rejected, encoding/json accepts it (Valid=%v)", s, json.Valid([]byte(s)))
	}
	for _, s := range invalid {
		_, ok := jsonText(s)
		assert.False(t, ok, "%q: accepted, encoding/json rejects it (Valid=%v)", s, json.Valid([]byte(s)))
	}
	equal := [][2]string{
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`"\ud800"`, `"` + "\uFFFD" + `"`},
		{`"\ud83d\ude00"`, `"😀"`},
		{`-0`, `0`},
		{`{"\u0061":"\u0062","c":"d"}`, `{"c":"d","a":"b"}`},
		{`1E2`, `100.0`},
	}
	for _, p := range equal {
		a, _ := jsonText(p[0])
		b, _ := jsonText(p[1])
		assert.Equal(t, string(a), string(b), "%s and %s", p[0], p[1])
	}
	deep := strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2)
	_, ok := jsonText(deep)
	assert.False(t, ok, "nesting beyond %d accepted", MaxDepth)
}

// TestCanonicalJSONValue checks that decoded values and their text give one
// form.
func TestCanonicalJSONValue(t *testing.T) {
	text := `{"app":"x","meta":{"id":1234,"t":[1.5,true,null,"\u4e16"]},"ver":"1.0"}`
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	assert.NoError(t, dec.Decode(&v))
	want, ok := jsonText(text)
	assert.True(t, ok)
	for _, other := range []any{v, map[string]any{"ver": "1.0", "app": "x", "meta": map[string]any{"t": []any{1.5, true, nil, "世"}, "id": 1234}}, json.RawMessage(text)} {
		got := AppendJSONValue(nil, other)
		assert.Equal(t, string(want), string(got), "%#v", other)
	}
}

// FuzzJSONText checks that the JSON parser accepts exactly what encoding/json
// accepts (within MaxDepth), and that the decoded value gives the same form
// as the text.
func FuzzJSONText(f *testing.F) {
	for _, s := range []string{
		``, `hello`, `{"app":"com.tencent.miniapp","meta":{"id":1,"title":"x"},"ver":"1.0"}`,
		`[1, 2.50, -0, 1e3, "a\u00e9\ud800", {"b":null,"a":true}]`, `{"a":1,"a":2}`, `"\ud83d\ude00"`,
		`1e400`, `{"":[[[[]]]]}`, "\xff", `{"a":"<&>"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		form, ours := jsonText(s)
		valid := json.Valid([]byte(s))
		deep := strings.Count(s, "[")+strings.Count(s, "{") > MaxDepth
		require.False(t, ours && !valid, "parser accepts invalid JSON %q", s)
		require.False(t, valid && !ours && !deep, "parser rejects valid JSON %q", s)
		if !ours || !utf8.ValidString(s) {
			return
		}
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var v any
		require.NoError(t, dec.Decode(&v), "encoding/json")
		require.Equal(t, string(form), string(AppendJSONValue(nil, v)), "value of %q differs from its text's form", s)
	})
}

// FuzzJSONTextAsLegacy checks that the parser built on internal/jsonscan
// accepts what the former parser accepted and writes the same canonical
// form, byte for byte, so no content signature changes.
func FuzzJSONTextAsLegacy(f *testing.F) {
	for _, s := range []string{
		``, ` `, `{"a":1,"a":2}`, `{"\u0061":"\ud800x","b":"\ud83d\ude00\udc00"}`, "\"\xff\\u0031\"",
		`[1, 2.50, -0, 1e3, 1E+400, -0.0e-1]`, `{"k":"\ud800\ud800\u12"}`, `"\u00e9\n\t\\\/\b\f\r\""`,
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), strings.Repeat("[", MaxDepth+1) + "1" + strings.Repeat("]", MaxDepth+1),
		"{\"a\":[true,false,null],\"b\":{}} \t", `{"a" : 1 , "b":[ ] }x`, "\"a\x00\"", `nul`, `-`, `01`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := AppendJSONText(nil, s)
		want, wantOK := legacyAppendJSONText(nil, s)
		require.Equal(t, wantOK, ok, "%q: acceptance differs from formerly", s)
		if ok {
			require.Equal(t, string(want), string(got), "%q: form differs from formerly", s)
		}
	})
}
