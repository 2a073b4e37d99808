package dedupe

import (
	"hash/maphash"
	"slices"
	"testing"
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
		if !ok || got != tc.exp {
			t.Fatalf("get(%s) = %d, %v; want %d", tc.k, got, ok, tc.exp)
		}
	}
	// Used in the order a, b, c: adding d evicts a, the head of a chain.
	d, hd := key("qq", "3")
	l.add(d, hd, 4)
	if _, ok := l.get(a, ha); ok {
		t.Fatal("a survived its eviction")
	}
	if got, ok := l.get(b, hb); !ok || got != 2 {
		t.Fatalf("b, chained behind a, = %d, %v", got, ok)
	}
	l.remove(c, hc)
	l.add(a, ha, 5) // takes c's entry, not d's or b's
	if l.len() != 3 || len(l.entries) != 4 {
		t.Fatalf("len %d with %d entries, want 3 and 4", l.len(), len(l.entries))
	}
	var order []string
	l.oldestFirst(func(k Key, _ int64) { order = append(order, k.String()) })
	if want := []string{"qq:3", "tg:1", "qq:1"}; !slices.Equal(order, want) {
		t.Fatalf("oldest first: %v, want %v", order, want)
	}
	l.remove(b, hb) // a chain member that is not its head
	if _, ok := l.get(a, ha); !ok {
		t.Fatal("a lost with b")
	}
	if _, ok := l.get(b, hb); ok {
		t.Fatal("b not removed")
	}
	l.purge()
	if l.len() != 0 || len(l.index) != 0 {
		t.Fatal("purge left keys")
	}
}
