package dedupe

import (
	"context"
	"time"
)

// defaultMaxResultBytes is the default [MemoryConfig.MaxResultBytes].
const defaultMaxResultBytes = 64 << 20

// MarkResult is Mark, keeping result with the mark; see [Store.MarkResult]. The
// store keeps a copy. Results are not written to snapshots.
func (s *MemoryStore) MarkResult(ctx context.Context, key Key, result []byte, ttl time.Duration) error {
	if err := checkCall(ctx, s.closed.Load(), key); err != nil {
		return err
	}
	if err := checkResult(s.Backend(), key, result); err != nil {
		return err
	}
	s.mark(key, result, orDefault(ttl, s.ttl), s.nanotime())
	return nil
}

// mark is MarkResult of a valid key and result at now, for ttl (> 0), on an
// open store.
func (s *MemoryStore) mark(key Key, result []byte, ttl time.Duration, now int64) {
	expires := now + int64(ttl)
	sh, h := s.shard(key)
	var kept []byte
	if len(result) > 0 {
		kept = append([]byte(nil), result...) // outside the lock
	}
	sh.mu.Lock()
	if len(sh.claims) != 0 {
		s.dropClaim(sh, key)
	}
	evictedLive := s.addMark(sh, key, h, expires, now)
	if len(sh.results) != 0 || kept != nil {
		sh.dropResult(key)
	}
	if kept != nil {
		sh.keepResult(key, kept, s.maxResults)
	}
	sh.mu.Unlock()
	if evictedLive {
		s.evictedLive()
	}
}

// Result returns the result kept with key's mark; see [Store.Result].
func (s *MemoryStore) Result(ctx context.Context, key Key) ([]byte, bool, error) {
	if err := checkCall(ctx, s.closed.Load(), key); err != nil {
		return nil, false, err
	}
	sh, h := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.marked(key, h, s.nanotime()) {
		return nil, false, nil
	}
	if res := sh.results[key]; res != nil {
		return append([]byte(nil), res...), true, nil
	}
	return nil, true, nil
}

// remove deletes k's mark and its result. The shard lock must be held.
func (sh *memShard) remove(k Key, h uint64) {
	sh.marks.remove(k, h)
	if len(sh.results) != 0 {
		sh.dropResult(k)
	}
}

// dropResult forgets k's result, if it has one.
func (sh *memShard) dropResult(k Key) {
	if res, ok := sh.results[k]; ok {
		sh.resultBytes -= len(res)
		delete(sh.results, k)
	}
}

// keepResult keeps res for k, first dropping other keys' results (Go's map
// order picks them) until it fits in bound bytes.
func (sh *memShard) keepResult(k Key, res []byte, bound int) {
	for other := range sh.results {
		if sh.resultBytes+len(res) <= bound {
			break
		}
		sh.dropResult(other)
	}
	if sh.results == nil {
		sh.results = make(map[Key][]byte)
	}
	sh.results[k] = res
	sh.resultBytes += len(res)
}
