package canon

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestNetstring pins the netstring form, including lengths of two and more
// digits.
func TestNetstring(t *testing.T) {
	for s, want := range map[string]string{
		"":           "0:,",
		"hi":         "2:hi,",
		"0123456789": "10:0123456789,",
	} {
		assert.Equal(t, want, string(AppendNetstring(nil, s)))
		assert.Equal(t, want, string(AppendNetstringBytes(nil, []byte(s))))
	}
	long := string(make([]byte, 100))
	assert.Equal(t, "100:", string(AppendNetstring(nil, long)[:4]))
}

// TestScalar checks that numbers and their strings give one text form.
func TestScalar(t *testing.T) {
	for _, tt := range []struct {
		v    any
		want string
	}{
		{nil, ""}, {"10001", "10001"}, {10001, "10001"}, {int8(-5), "-5"}, {uint64(1 << 63), "9223372036854775808"},
		{10001.0, "10001"}, {float32(1.5), "1.5"}, {json.Number("10001"), "10001"}, {json.Number("-0"), "0"},
		{json.Number("1e2"), "100"}, {json.Number("123456789012345678"), "123456789012345678"}, {true, "true"},
		{1e20, "1e+20"},
	} {
		assert.Equal(t, tt.want, string(AppendScalar(nil, tt.v)), "%#v", tt.v)
	}
	_, ok := AppendInteger(nil, 1.0)
	assert.False(t, ok, "a float is not an integer type")
}

// TestImageID checks the order of the identity fields.
func TestImageID(t *testing.T) {
	const md5 = "dbb3746f0128c88f07ceb6f23812f987"
	for _, tt := range []struct {
		data map[string]any
		want string
	}{
		{map[string]any{"md5": "DBB3746F0128C88F07CEB6F23812F987", "url": "https://x/1"}, "md5:" + md5},
		{map[string]any{"sha1": "ABC"}, "sha1:abc"},
		{map[string]any{"md5": "not hex"}, "md5:not hex"},
		{map[string]any{"file": "{DBB3746F-0128-C88F-07CE-B6F23812F987}.jpg"}, "md5:" + md5},
		{map[string]any{"fid": "x" + md5 + "y"}, "md5:" + md5},
		{map[string]any{"file": "https://H.example:443/a?rkey=1&fileid=F#x"}, "url:h.example/a?fileid=F"},
		{map[string]any{"url": "  http://[::1]:80  "}, "url:[::1]/"},
		{map[string]any{"file": "image", "md5": 5}, ""},
	} {
		assert.Equal(t, tt.want, string(AppendImageID(nil, tt.data)), "%v", tt.data)
		id, digest, url := AppendImageKeyID(nil, tt.data)
		assert.Equal(t, tt.want, string(id), "AppendImageKeyID(%v)", tt.data)
		assert.Equal(t, strings.HasPrefix(tt.want, "md5:") || strings.HasPrefix(tt.want, "sha1:"), digest, "%v", tt.data)
		if !digest && url != "" {
			assert.Equal(t, tt.want, string(AppendImageURLID(nil, url)), "the URL identity of %v", tt.data)
		}
	}
	id, _, url := AppendImageKeyID(nil, map[string]any{"md5": md5, "url": "https://H.example:443/a?rkey=1&fileid=F#x"})
	assert.Equal(t, "md5:"+md5, string(id))
	assert.Equal(t, "url:h.example/a?fileid=F", string(AppendImageURLID(nil, url)), "the URL identity of an image with a digest")
}
