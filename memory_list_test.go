package dedupe

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The comparisons of the memory store's walk order agree with comparing the
// keys' text forms, on keys whose channels are prefixes of each other and
// whose ids hold ':' and bytes on either side of it.
func TestCompareKeysMatchesText(t *testing.T) {
	keys := []Key{
		{"a", "1"}, {"a", ":"}, {"a", "9"}, {"ab", "1"}, {"a-", "1"}, {"a", "a:b"},
		{"b", "0"}, {"web", "a:b:c"}, {"we", "b"}, {"web", "a"}, {"A", "z"}, {"a", "\u00e9"},
	}
	for _, a := range keys {
		for _, b := range keys {
			want := strings.Compare(a.String(), b.String())
			assert.Equal(t, want, compareKeys(a, b), "compareKeys(%s, %s)", a, b)
			for _, s := range []string{b.String(), b.Channel, b.Channel + ":", b.String() + "x", ""} {
				assert.Equal(t, strings.Compare(a.String(), s), compareKeyText(a, s), "compareKeyText(%s, %q)", a, s)
			}
		}
	}
}
