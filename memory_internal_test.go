package dedupe

import (
	"hash/maphash"
	"testing"

	"github.com/stretchr/testify/require"
)

// The LRU keeps the most recently used keys, reuses removed entries, and
// tells apart keys whose hashes are equal (one id on several channels).
func TestMarkLRU(t *testing.T) {
	seed := maphash.MakeSeed()
	l := newMarkLRU(seed, 3)
	key := func(ch, id string) (Key, uint64) {
		return Key{Channel: ch, MessageID: id}, maphash.String(seed, id)
	}
	a, ha := key("qq", "1")
	b, hb := key("tg", "1") // same hash as a
	c, hc := key("qq", "2")
	l.add(a, ha, 1)
	l.add(b, hb, 2)
	l.add(c, hc, 3)
	for _, tc := range []struct {
		k   Key
		h   uint64
		exp int64
	}{{a, ha, 1}, {b, hb, 2}, {c, hc, 3}} {
		got, ok := l.get(tc.k, tc.h)
		require.True(t, ok, "get(%s)", tc.k)
		require.Equal(t, tc.exp, got, "get(%s)", tc.k)
	}
	// Used in the order a, b, c: adding d evicts a, the head of a chain.
	d, hd := key("qq", "3")
	l.add(d, hd, 4)
	_, ok := l.get(a, ha)
	require.False(t, ok, "a survived its eviction")
	got, ok := l.get(b, hb)
	require.True(t, ok, "b, chained behind a")
	require.Equal(t, int64(2), got, "b, chained behind a")
	l.remove(c, hc)
	l.add(a, ha, 5) // takes c's entry, not d's or b's
	require.Equal(t, 3, l.len(), "len")
	require.Len(t, l.entries, 4, "entries")
	var order []string
	l.oldestFirst(func(k Key, _ int64) { order = append(order, k.String()) })
	require.Equal(t, []string{"qq:3", "tg:1", "qq:1"}, order, "oldest first")
	l.remove(b, hb) // a chain member that is not its head
	_, ok = l.get(a, ha)
	require.True(t, ok, "a lost with b")
	_, ok = l.get(b, hb)
	require.False(t, ok, "b not removed")
	l.purge()
	require.Zero(t, l.len(), "purge left keys")
	require.Empty(t, l.index, "purge left keys")
}
