package idempotency

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Stats counts what a middleware refused on its own account. Give one to
// [WithStats] and read its fields at any time: they are atomic, so a Stats
// is safe for concurrent use and may be shared by several middlewares.
type Stats struct {
	// OverQuota counts the requests with a new key refused with 503
	// over-quota: their scope held its quota of keys ([WithQuota]), or the
	// middleware its share of a bounded store.
	OverQuota atomic.Uint64
}

// Shares of a bounded store ([dedupe.Evicter]) that make the default quota.
const (
	// marksPerKey is the marks a key takes in the store: its response's
	// and its binding's.
	marksPerKey = 2
	// storeShare: the keys held take at most a half of the store's marks,
	// the room that lets a sharded store (the memory store evicts from a
	// key's shard once that shard is full) take them all without evicting.
	storeShare = 2
	// scopeShare: under WithScope, one scope holds at most an eighth of
	// the keys the middleware may hold, so that no one caller can take the
	// others' room.
	scopeShare = 8
)

// limits returns the quota of keys one scope may hold and of keys all may
// hold, for c over st (0: no bound); see [WithQuota].
func (c *config) limits(st dedupe.Store) (perScope, total int) {
	if c.quota < 0 {
		return 0, 0
	}
	if ev, ok := st.(dedupe.Evicter); ok {
		total = max(ev.MaxMarks()/marksPerKey/storeShare, 1)
	}
	switch {
	case c.quota > 0:
		perScope = c.quota
	case total > 0 && c.scoped:
		perScope = max(total/scopeShare, 1)
	default:
		perScope = total
	}
	return perScope, total
}

// quota counts the keys each scope holds in the store, in this process: a
// key from the first request that used it until the TTL after its last run.
// A scope holding perScope keys, or all scopes holding total, is refused new
// ones until some expire; keys it holds pass. Scopes and keys are kept as
// hashes, about 50 bytes a key.
type quota struct {
	perScope, total int   // 0: no bound
	ttl             int64 // nanoseconds
	now             func() time.Time
	seed            maphash.Seed

	mu     sync.Mutex
	scopes map[uint64]*scopeKeys
	held   int   // keys held by every scope
	next   int64 // no key of any scope expires before it
	added  int   // keys added since the last sweep
}

// scopeKeys are the keys one scope holds, each with its expiry.
type scopeKeys struct {
	keys map[uint64]int64
	next int64 // no key expires before it
}

// newQuota returns the quota of c over st, or nil if there is none.
func newQuota(c *config, st dedupe.Store) *quota {
	perScope, total := c.limits(st)
	if perScope == 0 && total == 0 {
		return nil
	}
	return &quota{perScope: perScope, total: total, ttl: int64(c.ttl), now: c.now,
		seed: maphash.MakeSeed(), scopes: make(map[uint64]*scopeKeys)}
}

// admit counts the key whose id is id in scope, unless it is new and the
// scope or the store has no room: then it returns false and the time until
// some of the keys in the way expire.
func (q *quota) admit(scope, id string) (bool, time.Duration) {
	sh, kh := maphash.String(q.seed, scope), maphash.String(q.seed, id)
	now := q.now().UnixNano()
	q.mu.Lock()
	defer q.mu.Unlock()
	sk := q.scopes[sh]
	if sk != nil {
		if exp, ok := sk.keys[kh]; ok && now < exp {
			return true, 0
		}
		if q.perScope > 0 && len(sk.keys) >= q.perScope && now >= sk.next {
			q.purge(sk, now)
		}
		if q.perScope > 0 && len(sk.keys) >= q.perScope {
			return false, time.Duration(sk.next - now)
		}
	}
	if q.total > 0 && q.held >= q.total && now >= q.next || q.added >= max(q.held, 1024) {
		q.sweep(now)
		sk = q.scopes[sh]
	}
	if q.total > 0 && q.held >= q.total {
		return false, time.Duration(q.next - now)
	}
	if sk == nil {
		sk = &scopeKeys{keys: make(map[uint64]int64)}
		q.scopes[sh] = sk
	}
	q.put(sk, kh, now+q.ttl)
	return true, 0
}

// hold counts the key whose id is id in scope until the TTL from now,
// whatever the room: the expiry of the marks its run wrote, or of a key the
// store holds already (kept by an earlier process).
func (q *quota) hold(scope, id string) {
	sh, kh := maphash.String(q.seed, scope), maphash.String(q.seed, id)
	now := q.now().UnixNano()
	q.mu.Lock()
	defer q.mu.Unlock()
	sk := q.scopes[sh]
	if sk == nil {
		sk = &scopeKeys{keys: make(map[uint64]int64)}
		q.scopes[sh] = sk
	}
	q.put(sk, kh, now+q.ttl)
}

// put sets the expiry of key kh of sk. q.mu must be held.
func (q *quota) put(sk *scopeKeys, kh uint64, exp int64) {
	if _, ok := sk.keys[kh]; !ok {
		q.held++
		q.added++
		if len(sk.keys) == 0 || exp < sk.next {
			sk.next = exp
		}
		if q.held == 1 || exp < q.next {
			q.next = exp
		}
	}
	sk.keys[kh] = exp
}

// purge drops the expired keys of sk and settles sk.next. q.mu must be held.
func (q *quota) purge(sk *scopeKeys, now int64) {
	sk.next = 0
	for k, exp := range sk.keys {
		switch {
		case now >= exp:
			delete(sk.keys, k)
			q.held--
		case sk.next == 0 || exp < sk.next:
			sk.next = exp
		}
	}
}

// sweep purges every scope, drops the empty ones and settles q.next. q.mu
// must be held.
func (q *quota) sweep(now int64) {
	q.next, q.added = 0, 0
	for h, sk := range q.scopes {
		q.purge(sk, now)
		if len(sk.keys) == 0 {
			delete(q.scopes, h)
			continue
		}
		if q.next == 0 || sk.next < q.next {
			q.next = sk.next
		}
	}
}
