package dedupe

import "log/slog"

// MaxMarks returns [MemoryConfig].MaxSize, the most marks the store holds.
// A new mark in a full shard evicts the least recently used mark of that
// shard, so the store may evict before it holds MaxMarks in all. It
// implements [Evicter].
func (s *MemoryStore) MaxMarks() int { return s.maxMarks }

// Evicted returns the number of marks the store evicted before their TTL ran
// out, to take new ones: each such key is new again before its window ended,
// and a copy of its message is processed again. The first is logged at warn
// level. It implements [Evicter].
func (s *MemoryStore) Evicted() uint64 { return s.evicted.Load() }

// addMark marks k, whose hash is h, until expires in sh, dropping the result
// of a mark it evicts, and reports whether that mark was live at now. The
// shard lock must be held; call evictedLive after releasing it if so.
func (s *MemoryStore) addMark(sh *memShard, k Key, h uint64, expires, now int64) (evictedLive bool) {
	evicted, until, ok := sh.marks.add(k, h, expires)
	if !ok {
		return false
	}
	if len(sh.results) != 0 {
		sh.dropResult(evicted)
	}
	return now < until
}

// evictedLive counts a live mark evicted from a shard, and logs the first:
// the store is too small for one TTL of messages, or a flood of distinct ids
// is shortening every message's window.
func (s *MemoryStore) evictedLive() {
	if s.evicted.Add(1) == 1 {
		s.logger.Warn("dedupe: memory: evicted a mark before its TTL ran out; its message would be processed again. "+
			"The store is full: size MaxSize for one TTL of messages, or a flood of distinct ids is filling it. "+
			"Stats.Evicted counts these evictions; this is logged once",
			slog.Int("max_size", s.maxMarks))
	}
}
