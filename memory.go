package dedupe

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// MemoryConfig configures a [MemoryStore]. The zero value gives the defaults.
type MemoryConfig struct {
	TTL   time.Duration // for Mark with ttl <= 0; default 24 h
	Lease time.Duration // for Claim and Extend with lease <= 0; default 5 min
	// MaxSize bounds the marks held: one more evicts the least recently used
	// mark of its shard, live or not (see [MemoryStore.Evicted]). Default
	// 10000.
	MaxSize int
	// MaxClaims bounds the claims held, which are never evicted: beyond it
	// Claim fails with [ErrStoreFull]. The bound is exact under concurrent
	// calls: a Claim is refused only while MaxClaims unexpired claims are
	// held. Default MaxSize.
	MaxClaims int
	// MaxResultBytes bounds the bytes of results kept with marks
	// ([Store.MarkResult]): beyond it, keeping one drops others (their marks stay).
	// Default 64 MiB.
	MaxResultBytes int
	// Now is the store's clock. Default: the monotonic clock, so that a change
	// of the wall clock does not shorten or lengthen TTLs.
	Now func() time.Time
	// SnapshotPath is the file [OpenMemoryStore] loads marks from and writes
	// them to every SnapshotInterval (default 1 min) and on Close, so that a
	// restarted gateway remembers what it processed. [NewMemoryStore] ignores
	// these two fields.
	SnapshotPath     string
	SnapshotInterval time.Duration
	// Logger receives the errors of background snapshots, and a warning the
	// first time the store evicts a mark before its TTL ran out (default
	// slog.Default()).
	Logger *slog.Logger
}

// defaultMemorySize is the default [MemoryConfig.MaxSize].
const defaultMemorySize = 10000

// MemoryStore is a [Store] in process memory, the default store of [New]: marks
// with a TTL in a bounded LRU, and claims beside it. It runs no goroutine.
//
// Shards by a hash of the key, each a mutex, an LRU of marks and a map of
// claims, keep callers on different keys apart. A full store evicts the least
// recently used mark of the new key's shard (Exists, Claim and Mark are uses):
// size MaxSize to hold the marks of one TTL. A live mark evicted makes its
// key new again before its TTL ran out: [MemoryStore.Evicted] counts them,
// and the first is logged. Claims are pinned, never evicted,
// so a flood cannot let a second copy run beside the first; beyond
// [MemoryConfig].MaxClaims, Claim fails with [ErrStoreFull].
type MemoryStore struct {
	ttl, lease time.Duration
	now        func() time.Time // nil: monotonic time since base
	base       time.Time
	seed       maphash.Seed
	mask       uint64
	maxClaims  int64
	maxResults int // bytes of results per shard
	shards     []memShard
	closed     atomic.Bool

	maxMarks      int           // MemoryConfig.MaxSize
	evicted       atomic.Uint64 // live marks evicted, see Evicted
	logger        *slog.Logger  // MemoryConfig.Logger
	snapshotPath  string        // "" without snapshots
	snapshotMu    sync.Mutex    // serialises snapshot writes
	stopSnapshots chan struct{}
	snapshotsDone chan struct{}
	held          atomic.Int64 // claims held, at most maxClaims
}

type memShard struct {
	mu          sync.Mutex
	marks       markLRU
	claims      map[Key]memClaim
	results     map[Key][]byte // the results kept with marks, made on first use
	resultBytes int            // the bytes of results
}

type memClaim struct {
	expires int64
	token   string
}

const (
	minShardSize = 128
	maxShards    = 64
)

// NewMemoryStore returns an empty memory store configured by cfg, ignoring its
// snapshot fields (see [OpenMemoryStore]).
func NewMemoryStore(cfg MemoryConfig) *MemoryStore {
	cfg.TTL = orDefault(cfg.TTL, DefaultTTL)
	cfg.Lease = orDefault(cfg.Lease, DefaultLease)
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = defaultMemorySize
	}
	if cfg.MaxClaims <= 0 {
		cfg.MaxClaims = cfg.MaxSize
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = defaultMaxResultBytes
	}
	n := 1 << bits.Len(uint(4*runtime.GOMAXPROCS(0)-1)) // power of two >= 4 per core
	n = min(n, maxShards)
	for n > 1 && cfg.MaxSize/n < minShardSize {
		n /= 2
	}
	s := &MemoryStore{
		ttl:        cfg.TTL,
		lease:      cfg.Lease,
		now:        cfg.Now,
		base:       time.Now(),
		seed:       maphash.MakeSeed(),
		mask:       uint64(n - 1),
		maxClaims:  int64(cfg.MaxClaims),
		shards:     make([]memShard, n),
		maxResults: max(cfg.MaxResultBytes/n, MaxResultSize),
		maxMarks:   cfg.MaxSize,
		logger:     cfg.Logger,
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	for i := range s.shards {
		size := cfg.MaxSize / n
		if i < cfg.MaxSize%n {
			size++
		}
		s.shards[i].marks = *newMarkLRU(s.seed, size)
		s.shards[i].claims = make(map[Key]memClaim)
	}
	return s
}

// shard returns the shard of k and k's hash. Message ids alone spread keys
// well enough.
func (s *MemoryStore) shard(k Key) (*memShard, uint64) {
	h := maphash.String(s.seed, k.MessageID)
	return &s.shards[h&s.mask], h
}

// nanotime returns the store's time in nanoseconds: monotonic since the store
// was made, or Unix time from an injected clock. One store uses one of the two.
func (s *MemoryStore) nanotime() int64 {
	if s.now != nil {
		return s.now().UnixNano()
	}
	return int64(time.Since(s.base))
}

// Exists reports whether key is marked and unexpired.
func (s *MemoryStore) Exists(ctx context.Context, key Key) (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	sh, h := s.shard(key)
	sh.mu.Lock()
	exp, found := sh.marks.get(key, h)
	ok := found && s.nanotime() < exp // the clock is read only for a key present
	if found && !ok {
		sh.remove(key, h)
	}
	sh.mu.Unlock()
	if ok {
		// Only valid keys are ever stored, so a hit needs no validation.
		return true, nil
	}
	return false, key.Validate()
}

// Mark records key as processed for ttl (ttl <= 0: the configured TTL).
func (s *MemoryStore) Mark(ctx context.Context, key Key, ttl time.Duration) error {
	return s.MarkResult(ctx, key, nil, ttl)
}

// Claim takes c.Key for c.Token unless it is marked or claimed by another
// token; see [Store.Claim]. With MaxClaims claims held, it drops the expired
// ones, and fails with [ErrStoreFull] if that frees none.
func (s *MemoryStore) Claim(ctx context.Context, c Claim, lease time.Duration) (Status, error) {
	if err := checkCall(ctx, s.closed.Load(), c.Key); err != nil {
		return 0, err
	}
	if !validToken(c.Token) {
		return 0, c.Validate()
	}
	return s.claim(c, orDefault(lease, s.lease), s.nanotime())
}

// claim is Claim of a valid c at now, for lease (> 0), on an open store.
func (s *MemoryStore) claim(c Claim, lease time.Duration, now int64) (Status, error) {
	sh, h := s.shard(c.Key)
	for swept := false; ; swept = true {
		sh.mu.Lock()
		st, full := s.claimLocked(sh, c, h, now, now+int64(lease))
		sh.mu.Unlock()
		if !full {
			return st, nil
		}
		if swept {
			return 0, fmt.Errorf("dedupe: memory: claim %s: %w (%d claims held)", c.Key, ErrStoreFull, s.maxClaims)
		}
		s.dropExpiredClaims(now)
		now = s.nanotime()
	}
}

// claimLocked is Claim under the shard lock. full reports that a new claim
// would exceed MaxClaims.
func (s *MemoryStore) claimLocked(sh *memShard, c Claim, h uint64, now, expires int64) (_ Status, full bool) {
	if sh.marked(c.Key, h, now) {
		return Duplicate, false
	}
	if len(sh.claims) != 0 {
		if cur, ok := sh.claims[c.Key]; ok {
			if now < cur.expires && cur.token != c.Token {
				return InFlight, false
			}
			// Its own claim again (idempotent), or an expired one: take the slot.
			sh.claims[c.Key] = memClaim{expires: expires, token: c.Token}
			return Claimed, false
		}
	}
	if !s.takeSlot() {
		return 0, true
	}
	sh.claims[c.Key] = memClaim{expires: expires, token: c.Token}
	return Claimed, false
}

// takeSlot counts one more claim held, unless MaxClaims are held already.
// It never counts beyond MaxClaims, even for a moment, so a Claim is refused
// only when MaxClaims claims are held.
func (s *MemoryStore) takeSlot() bool {
	for {
		n := s.held.Load()
		if n >= s.maxClaims {
			return false
		}
		if s.held.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// dropClaim deletes key's claim, if any, from sh. The shard lock must be held.
func (s *MemoryStore) dropClaim(sh *memShard, key Key) {
	n := len(sh.claims)
	delete(sh.claims, key)
	if len(sh.claims) != n {
		s.held.Add(-1)
	}
}

// dropExpiredClaims deletes the claims whose lease ran out from every shard.
func (s *MemoryStore) dropExpiredClaims(now int64) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, c := range sh.claims {
			if now >= c.expires {
				delete(sh.claims, k)
				s.held.Add(-1)
			}
		}
		sh.mu.Unlock()
	}
}

// Extend renews c's lease if c still holds its key; see [Store.Extend].
func (s *MemoryStore) Extend(ctx context.Context, c Claim, lease time.Duration) error {
	lease = orDefault(lease, s.lease)
	return s.update(ctx, "extend", c, func(sh *memShard, now int64) {
		sh.claims[c.Key] = memClaim{expires: now + int64(lease), token: c.Token}
	})
}

// Release drops c's claim if c still holds its key; see [Store.Release].
func (s *MemoryStore) Release(ctx context.Context, c Claim) error {
	return s.update(ctx, "release", c, func(sh *memShard, _ int64) {
		s.dropClaim(sh, c.Key)
	})
}

// update runs f under the shard lock if c still holds its key.
func (s *MemoryStore) update(ctx context.Context, op string, c Claim, f func(*memShard, int64)) error {
	if err := checkClaimCall(ctx, s.closed.Load(), c); err != nil {
		return err
	}
	return s.updateHeld(op, c, s.nanotime(), f)
}

// updateHeld is update of a c that passed checkClaimCall, at now.
func (s *MemoryStore) updateHeld(op string, c Claim, now int64, f func(*memShard, int64)) error {
	sh, _ := s.shard(c.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	cur, ok := sh.claims[c.Key]
	if !ok || now >= cur.expires || cur.token != c.Token {
		return fmt.Errorf("dedupe: memory: %s %s: %w", op, c.Key, ErrNotOwner)
	}
	f(sh, now)
	return nil
}

func (s *MemoryStore) defaultTTL() time.Duration { return s.ttl }

// Backend returns "memory".
func (s *MemoryStore) Backend() string { return "memory" }

// Close empties the store, after writing a last snapshot if it has a snapshot
// file (returning that error). Later calls return [ErrClosed]. Close is
// idempotent.
func (s *MemoryStore) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	var err error
	if s.snapshotPath != "" {
		close(s.stopSnapshots)
		<-s.snapshotsDone
		err = s.SaveSnapshot()
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.marks.purge()
		clear(sh.claims)
		sh.results, sh.resultBytes = nil, 0
		sh.mu.Unlock()
	}
	return err
}

// Len returns the number of marks and claims held, expired ones not yet dropped
// included.
func (s *MemoryStore) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.marks.len() + len(sh.claims)
		sh.mu.Unlock()
	}
	return n
}

// marked reports whether k holds a live mark, dropping an expired one. The
// shard lock must be held.
func (sh *memShard) marked(k Key, h uint64, now int64) bool {
	exp, ok := sh.marks.get(k, h)
	if !ok {
		return false
	}
	if now >= exp {
		sh.remove(k, h)
		return false
	}
	return true
}

// Forget drops key's mark and its result unless a live claim holds key; see
// [Forgetter]. The snapshot file, if any, keeps the mark until the next
// snapshot is written (every SnapshotInterval and on Close): a process that
// dies before then loads it again.
func (s *MemoryStore) Forget(ctx context.Context, key Key) (bool, error) {
	if err := checkCall(ctx, s.closed.Load(), key); err != nil {
		return false, err
	}
	sh, h := s.shard(key)
	now := s.nanotime()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c, ok := sh.claims[key]; ok {
		if now < c.expires {
			return false, fmt.Errorf("dedupe: memory: forget %s: %w", key, ErrInFlight)
		}
		s.dropClaim(sh, key)
	}
	exp, found := sh.marks.get(key, h)
	if found {
		sh.remove(key, h)
	}
	return found && now < exp, nil
}
