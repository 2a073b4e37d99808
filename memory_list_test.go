package dedupe

import (
	"strings"
	"testing"
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
			if got := compareKeys(a, b); got != want {
				t.Errorf("compareKeys(%s, %s) = %d, want %d", a, b, got, want)
			}
			for _, s := range []string{b.String(), b.Channel, b.Channel + ":", b.String() + "x", ""} {
				if got, want := compareKeyText(a, s), strings.Compare(a.String(), s); got != want {
					t.Errorf("compareKeyText(%s, %q) = %d, want %d", a, s, got, want)
				}
			}
		}
	}
}
