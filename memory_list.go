package dedupe

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The optional interfaces of package migrate, for the memory store. Marks
// are walked in the order of their text form, the cursor being the last key
// yielded; the store keeps no order, so each page is the smallest keys after
// the cursor, found in one pass over every shard that holds at most limit of
// them aside.

// ListMarks calls yield with up to limit marks whose text form
// ("{channel}:{message_id}") follows cursor, in that order, each with its
// expiry on the wall clock, and returns the cursor of the next page ("" after
// the last). Expired marks not yet dropped are included; claims never are.
// Each page reads every shard once. It implements [Lister].
func (s *MemoryStore) ListMarks(ctx context.Context, cursor string, limit int, yield func(key Key, expires time.Time)) (string, error) {
	if s.closed.Load() {
		return "", ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	limit = max(limit, 1)
	now, wall := s.clocks()
	page := keyHeap{}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.marks.oldestFirst(func(k Key, exp int64) {
			if cursor != "" && compareKeyText(k, cursor) <= 0 {
				return
			}
			switch {
			case len(page) < limit:
				heap.Push(&page, listedMark{k, exp})
			case compareKeys(k, page[0].key) < 0:
				page[0] = listedMark{k, exp}
				heap.Fix(&page, 0)
			}
		})
		sh.mu.Unlock()
	}
	slices.SortFunc(page, func(a, b listedMark) int { return compareKeys(a.key, b.key) })
	for _, m := range page {
		yield(m.key, time.Unix(0, wall+(m.expires-now)))
	}
	if len(page) < limit {
		return "", nil
	}
	return page[len(page)-1].key.String(), nil
}

// MarkUntil marks each keys[i] until expires[i] (wall clock), keeping a live
// mark's later expiry and result and dropping claims, and returns how many keys had a
// live mark. A store at [MemoryConfig].MaxSize evicts marks as Mark does:
// size it for every mark copied. It implements [BulkMarker].
func (s *MemoryStore) MarkUntil(ctx context.Context, keys []Key, expires []time.Time) (int, error) {
	if len(keys) != len(expires) {
		return 0, fmt.Errorf("dedupe: memory: mark until: %d keys, %d expiries", len(keys), len(expires))
	}
	present := 0
	for i, k := range keys {
		if err := checkCall(ctx, s.closed.Load(), k); err != nil {
			return present, err
		}
		now, wall := s.clocks()
		exp := now + (expires[i].UnixNano() - wall)
		sh, h := s.shard(k)
		sh.mu.Lock()
		if len(sh.claims) != 0 {
			s.dropClaim(sh, k)
		}
		if cur, ok := sh.marks.get(k, h); ok && now < cur {
			present++
			exp = max(exp, cur)
		} else if len(sh.results) != 0 {
			sh.dropResult(k) // an expired mark's
		}
		evictedLive := s.addMark(sh, k, h, exp, now)
		sh.mu.Unlock()
		if evictedLive {
			s.evictedLive()
		}
	}
	return present, nil
}

// CountLive returns the numbers of live marks and claims and the earliest
// and latest expiry of the marks (wall clock). It implements
// [Counter].
func (s *MemoryStore) CountLive(ctx context.Context) (marks, claims int64, oldest, newest time.Time, err error) {
	if s.closed.Load() {
		return 0, 0, oldest, newest, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, oldest, newest, err
	}
	now, wall := s.clocks()
	var lo, hi int64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.marks.oldestFirst(func(_ Key, exp int64) {
			if exp <= now {
				return
			}
			if marks++; marks == 1 || exp < lo {
				lo = exp
			}
			hi = max(hi, exp)
		})
		for _, c := range sh.claims {
			if now < c.expires {
				claims++
			}
		}
		sh.mu.Unlock()
	}
	if marks > 0 {
		oldest, newest = time.Unix(0, wall+(lo-now)), time.Unix(0, wall+(hi-now))
	}
	return marks, claims, oldest, newest, nil
}

// listedMark is a mark of a page of ListMarks, its expiry in store time.
type listedMark struct {
	key     Key
	expires int64
}

// keyHeap is a max-heap of marks by key: its top is the greatest key of the
// page so far, the first to give way to a smaller one.
type keyHeap []listedMark

func (h keyHeap) Len() int           { return len(h) }
func (h keyHeap) Less(i, j int) bool { return compareKeys(h[i].key, h[j].key) > 0 }
func (h keyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *keyHeap) Push(x any)        { *h = append(*h, x.(listedMark)) }
func (h *keyHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	*h = old[:len(old)-1]
	return m
}

// compareKeys compares the text forms of a and b byte by byte, without
// building them. Channels hold no ':'.
func compareKeys(a, b Key) int {
	if a.Channel == b.Channel {
		return strings.Compare(a.MessageID, b.MessageID)
	}
	n := min(len(a.Channel), len(b.Channel))
	if c := strings.Compare(a.Channel[:n], b.Channel[:n]); c != 0 {
		return c
	}
	if len(a.Channel) == n { // a's ':' meets a byte of b's channel
		return cmp.Compare(':', b.Channel[n])
	}
	return cmp.Compare(a.Channel[n], ':')
}

// compareKeyText compares the text form of k with s byte by byte, without
// building it.
func compareKeyText(k Key, s string) int {
	n := min(len(k.Channel), len(s))
	if c := strings.Compare(k.Channel, s[:n]); c != 0 || len(s) == n {
		if c == 0 {
			return 1 // s is the channel or a prefix of it: the text is longer
		}
		return c
	}
	if s[n] != ':' {
		return cmp.Compare(':', s[n])
	}
	return strings.Compare(k.MessageID, s[n+1:])
}
