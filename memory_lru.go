package dedupe

import (
	"hash/maphash"
	"math"
)

// markLRU is the LRU of one memory shard's marks: each key's expiry, most
// recently used first, at most size keys. It is built for the store's
// footprint (56 bytes a key besides the index and the key's strings, where
// simplelru takes an allocation of 64 and an index holding the key): the
// entries live in one slice and link to each other by index, and the index
// maps the hash of a key's message id to its entry, so that it holds no
// string. Keys whose hashes are equal (the same id on two channels) are
// chained.
//
// It is not safe for concurrent use: the shard's mutex guards it.
type markLRU struct {
	seed    maphash.Seed // of the hashes, see MemoryStore.hash
	size    int
	entries []markEntry      // entries[0] is the list's sentinel
	index   map[uint64]int32 // hash -> first entry of its chain
	free    int32            // first of the removed entries, linked by next
	n       int              // entries in the list
}

type markEntry struct {
	key        Key
	expires    int64 // see MemoryStore.nanotime
	prev, next int32 // the list, most recent first; 0 is the sentinel
	chain      int32 // the next entry with the same hash, or 0
}

// maxMarkLRU is the most keys one LRU holds: its entries link by int32.
const maxMarkLRU = math.MaxInt32 - 1

// newMarkLRU returns an empty LRU of at most size keys (at most maxMarkLRU),
// whose hashes are made with seed; size must be positive.
func newMarkLRU(seed maphash.Seed, size int) *markLRU {
	size = min(size, maxMarkLRU)
	return &markLRU{seed: seed, size: size, entries: make([]markEntry, 1, min(size, 64)+1), index: make(map[uint64]int32)}
}

// find returns the entry of k, whose hash is h, or 0.
func (l *markLRU) find(k Key, h uint64) int32 {
	i, ok := l.index[h]
	if !ok {
		return 0
	}
	for ; i != 0; i = l.entries[i].chain {
		if l.entries[i].key == k {
			return i
		}
	}
	return 0
}

// get returns k's expiry and makes k the most recently used key.
func (l *markLRU) get(k Key, h uint64) (expires int64, ok bool) {
	i := l.find(k, h)
	if i == 0 {
		return 0, false
	}
	l.unlink(i)
	l.pushFront(i)
	return l.entries[i].expires, true
}

// add sets k's expiry and makes it the most recently used key, evicting the
// least recently used key if the LRU is full and returning it with its
// expiry.
func (l *markLRU) add(k Key, h uint64, expires int64) (evicted Key, evictedExpires int64, ok bool) {
	if i := l.find(k, h); i != 0 {
		l.entries[i].expires = expires
		l.unlink(i)
		l.pushFront(i)
		return Key{}, 0, false
	}
	var i int32
	switch {
	case l.n >= l.size:
		i = l.entries[0].prev // the least recently used
		evicted, evictedExpires, ok = l.entries[i].key, l.entries[i].expires, true
		l.drop(i)
	case l.free != 0:
		i = l.free
		l.free = l.entries[i].next
	default:
		if len(l.entries) == cap(l.entries) {
			// Grow to at most size+1 entries, so that a full LRU has no slack.
			grown := make([]markEntry, len(l.entries), min(2*cap(l.entries), l.size+1))
			copy(grown, l.entries)
			l.entries = grown
		}
		i = int32(len(l.entries))
		l.entries = l.entries[:i+1]
	}
	e := &l.entries[i]
	e.key, e.expires = k, expires
	e.chain = l.index[h] // 0 if absent
	l.index[h] = i
	l.pushFront(i)
	l.n++
	return evicted, evictedExpires, ok
}

// remove deletes k, if present.
func (l *markLRU) remove(k Key, h uint64) {
	if i := l.find(k, h); i != 0 {
		l.drop(i)
		l.entries[i] = markEntry{next: l.free}
		l.free = i
	}
}

// drop takes entry i out of the list and the index, leaving it unused.
func (l *markLRU) drop(i int32) {
	l.unlink(i)
	l.n--
	e := &l.entries[i]
	h := maphash.String(l.seed, e.key.MessageID)
	head := l.index[h]
	switch {
	case head == i && e.chain == 0:
		delete(l.index, h)
	case head == i:
		l.index[h] = e.chain
	default:
		for j := head; j != 0; j = l.entries[j].chain {
			if l.entries[j].chain == i {
				l.entries[j].chain = e.chain
				break
			}
		}
	}
	e.key = Key{} // let the strings go
}

func (l *markLRU) unlink(i int32) {
	e := &l.entries[i]
	l.entries[e.prev].next = e.next
	l.entries[e.next].prev = e.prev
}

func (l *markLRU) pushFront(i int32) {
	head := &l.entries[0]
	e := &l.entries[i]
	e.prev, e.next = 0, head.next
	l.entries[head.next].prev = i
	head.next = i
}

// len returns the number of keys held.
func (l *markLRU) len() int { return l.n }

// oldestFirst calls f with each key and its expiry, least recently used first.
func (l *markLRU) oldestFirst(f func(k Key, expires int64)) {
	for i := l.entries[0].prev; i != 0; i = l.entries[i].prev {
		f(l.entries[i].key, l.entries[i].expires)
	}
}

// purge deletes every key.
func (l *markLRU) purge() {
	*l = *newMarkLRU(l.seed, l.size)
}
