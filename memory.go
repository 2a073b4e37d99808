package dedupe

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// MemoryConfig configures a [MemoryStore]. The zero value gives the defaults.
type MemoryConfig struct {
	// TTL is how long a mark lasts when Mark is given ttl <= 0. Default 24 h.
	TTL time.Duration
	// Lease is how long a claim lasts when Claim is given lease <= 0. Default 5 min.
	Lease time.Duration
	// MaxSize bounds the number of marks and claims held together. When it is
	// reached the least recently used entry of the key's shard is evicted.
	// Default 10000.
	MaxSize int
	// Now is the store's clock. By default the store reads the monotonic clock,
	// so that a change of the wall clock does not shorten or lengthen TTLs.
	Now func() time.Time
}

// DefaultMemorySize is the default [MemoryConfig.MaxSize].
const DefaultMemorySize = 10000

// MemoryStore is a [Store] held in process memory: marks and claims with a TTL in
// a bounded LRU. It is the default store of [New], right for a single gateway
// process whose marks need not survive a restart.
//
// The store is split into shards by a hash of the key, each a mutex and an LRU
// of its own, so concurrent callers on different keys rarely contend. The LRU
// order is kept per shard: when the store is full, the entry evicted is the least
// recently used of the new key's shard, which is not always the least recently
// used of the whole store. Exists, Claim and Mark count as uses. Expired entries
// are dropped when they are next touched or evicted; the store runs no goroutine.
//
// A MemoryStore is safe for concurrent use.
type MemoryStore struct {
	ttl, lease time.Duration
	now        func() time.Time // nil: monotonic time since base
	base       time.Time
	seed       maphash.Seed
	mask       uint64
	shards     []memShard
	closed     atomic.Bool
}

type memShard struct {
	mu    sync.Mutex
	lru   *simplelru.LRU[Key, memEntry]
	token uint64 // next claim token of this shard
	slab  []byte // unused space for token strings
	// Pad to two cache lines, so that no two shards share a line (or an
	// adjacent-line prefetch) wherever the array starts.
	_ [128 - 48]byte
}

// memEntry is a mark (token 0) or a claim (token != 0). Sixteen bytes keep the
// LRU's list element in a smaller size class.
type memEntry struct {
	expires int64 // see MemoryStore.nanotime
	token   uint64
}

func (e memEntry) claimed() bool { return e.token != 0 }

// tokenBit is set in every claim token, so that no claim has token 0.
const tokenBit = 1 << 63

const (
	tokenLen      = 16 // hex digits of a uint64
	tokenSlabSize = 256 * tokenLen
	minShardSize  = 128
	maxShards     = 64
)

// NewMemoryStore returns an empty memory store configured by cfg.
func NewMemoryStore(cfg MemoryConfig) *MemoryStore {
	cfg.TTL = orDefault(cfg.TTL, DefaultTTL)
	cfg.Lease = orDefault(cfg.Lease, DefaultLease)
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = DefaultMemorySize
	}
	n := 1 << bits.Len(uint(4*runtime.GOMAXPROCS(0)-1)) // power of two >= 4 per core
	n = min(n, maxShards)
	for n > 1 && cfg.MaxSize/n < minShardSize {
		n /= 2
	}
	s := &MemoryStore{
		ttl:    cfg.TTL,
		lease:  cfg.Lease,
		now:    cfg.Now,
		base:   time.Now(),
		seed:   maphash.MakeSeed(),
		mask:   uint64(n - 1),
		shards: make([]memShard, n),
	}
	shardBits := bits.Len(uint(n - 1))
	base := rand.Uint64()
	for i := range s.shards {
		size := cfg.MaxSize / n
		if i < cfg.MaxSize%n {
			size++
		}
		// NewLRU fails only for a size <= 0, which cannot happen here.
		lru, _ := simplelru.NewLRU[Key, memEntry](size, nil)
		s.shards[i].lru = lru
		// Tokens of shard i are i modulo n (plus a random base), so no two shards
		// hand out the same one.
		s.shards[i].token = base<<shardBits | uint64(i)
	}
	return s
}

// shard returns the shard of k. Message ids alone spread keys well enough.
func (s *MemoryStore) shard(k Key) *memShard {
	return &s.shards[maphash.String(s.seed, k.MessageID)&s.mask]
}

// nanotime returns the store's time in nanoseconds: monotonic since the store
// was made, or Unix time from an injected clock. One store uses one of the two.
func (s *MemoryStore) nanotime() int64 {
	if s.now != nil {
		return s.now().UnixNano()
	}
	return int64(time.Since(s.base))
}

// check returns the error a call with key should fail with, if any.
func (s *MemoryStore) check(ctx context.Context, key Key) error {
	return checkCall(ctx, s.closed.Load(), key)
}

// Exists reports whether key is marked and unexpired.
func (s *MemoryStore) Exists(ctx context.Context, key Key) (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	now := s.nanotime()
	sh := s.shard(key)
	sh.mu.Lock()
	e, ok := sh.get(key, now)
	sh.mu.Unlock()
	if ok {
		// Only valid keys are ever stored, so a hit needs no validation.
		return !e.claimed(), nil
	}
	return false, key.Validate()
}

// Mark records key as processed for ttl (ttl <= 0: the configured TTL), replacing
// any mark or claim on it.
func (s *MemoryStore) Mark(ctx context.Context, key Key, ttl time.Duration) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	expires := s.nanotime() + int64(orDefault(ttl, s.ttl))
	sh := s.shard(key)
	sh.mu.Lock()
	sh.lru.Add(key, memEntry{expires: expires})
	sh.mu.Unlock()
	return nil
}

// Claim takes key for lease (lease <= 0: the configured lease) unless it is
// marked or claimed. See [Store.Claim].
func (s *MemoryStore) Claim(ctx context.Context, key Key, lease time.Duration) (Claim, error) {
	if err := s.check(ctx, key); err != nil {
		return Claim{}, err
	}
	lease = orDefault(lease, s.lease)
	now := s.nanotime()
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, ok := sh.get(key, now); ok {
		if e.claimed() {
			return Claim{Key: key, Status: InFlight}, nil
		}
		return Claim{Key: key, Status: Duplicate}, nil
	}
	tok := sh.token | tokenBit
	sh.token += s.mask + 1
	sh.lru.Add(key, memEntry{expires: now + int64(lease), token: tok})
	return Claim{Key: key, Status: Claimed, Token: sh.tokenString(tok)}, nil
}

// Extend renews the lease of c to lease from now (lease <= 0: the configured
// lease) if c still holds its key, and otherwise returns [ErrNotOwner].
func (s *MemoryStore) Extend(ctx context.Context, c Claim, lease time.Duration) error {
	lease = orDefault(lease, s.lease)
	return s.update(ctx, c, func(sh *memShard, e memEntry, now int64) {
		e.expires = now + int64(lease)
		sh.lru.Add(c.Key, e)
	})
}

// Release drops c's claim if c still holds its key, and otherwise returns
// [ErrNotOwner].
func (s *MemoryStore) Release(ctx context.Context, c Claim) error {
	return s.update(ctx, c, func(sh *memShard, _ memEntry, _ int64) {
		sh.lru.Remove(c.Key)
	})
}

// update runs f under the shard lock if c still holds its key.
func (s *MemoryStore) update(ctx context.Context, c Claim, f func(*memShard, memEntry, int64)) error {
	if err := s.check(ctx, c.Key); err != nil {
		return err
	}
	tok, ok := parseToken(c.Token)
	if !ok || tok&tokenBit == 0 || c.Status != Claimed {
		return fmt.Errorf("%w: %s: not a claim this store made", ErrNotOwner, c.Key)
	}
	now := s.nanotime()
	sh := s.shard(c.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, found := sh.get(c.Key, now)
	if !found || !e.claimed() || e.token != tok {
		return fmt.Errorf("%w: %s", ErrNotOwner, c.Key)
	}
	f(sh, e, now)
	return nil
}

// Backend returns "memory".
func (s *MemoryStore) Backend() string { return "memory" }

// Close empties the store. Later calls return [ErrClosed]. Close is idempotent.
func (s *MemoryStore) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.lru.Purge()
		sh.slab = nil
		sh.mu.Unlock()
	}
	return nil
}

// Len returns the number of entries held, expired ones not yet dropped included.
func (s *MemoryStore) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.lru.Len()
		sh.mu.Unlock()
	}
	return n
}

// get returns the live entry for k, dropping it if it has expired.
// The shard lock must be held.
func (sh *memShard) get(k Key, now int64) (memEntry, bool) {
	e, ok := sh.lru.Get(k)
	if !ok {
		return memEntry{}, false
	}
	if now >= e.expires {
		sh.lru.Remove(k)
		return memEntry{}, false
	}
	return e, true
}

// tokenString formats tok as 16 hex digits in memory carved from a slab shared
// by many tokens, so a claim costs no allocation of its own. The bytes are never
// written again once a string refers to them. The shard lock must be held.
func (sh *memShard) tokenString(tok uint64) string {
	if len(sh.slab) < tokenLen {
		sh.slab = make([]byte, tokenSlabSize)
	}
	b := sh.slab[:tokenLen:tokenLen]
	sh.slab = sh.slab[tokenLen:]
	const digits = "0123456789abcdef"
	for i := tokenLen - 1; i >= 0; i-- {
		b[i] = digits[tok&0xf]
		tok >>= 4
	}
	return unsafe.String(&b[0], tokenLen)
}

func parseToken(s string) (uint64, bool) {
	if len(s) != tokenLen {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 16, 64)
	return v, err == nil
}
