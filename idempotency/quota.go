package idempotency

import (
	"crypto/sha256"
	"hash/maphash"
	"net/http"
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
	// over-quota: their caller held its quota of keys ([WithQuota]), or the
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
	// callerShare: with callers told apart (WithScope, WithCaller), one
	// caller holds at most an eighth of the keys the middleware may hold,
	// so that no one caller can take the others' room.
	callerShare = 8
)

// limits returns the quota of keys one caller may hold and of keys all may
// hold, for c over st (0: no bound); see [WithQuota].
func (c *config) limits(st dedupe.Store) (perCaller, total int) {
	if c.quota < 0 {
		return 0, 0
	}
	if ev, ok := st.(dedupe.Evicter); ok {
		total = max(ev.MaxMarks()/marksPerKey/storeShare, 1)
	}
	switch {
	case c.quota > 0:
		perCaller = c.quota
	case total > 0 && (c.scoped || c.caller != nil):
		perCaller = max(total/callerShare, 1)
	default:
		perCaller = total
	}
	return perCaller, total
}

// callerOf names the caller of r, whose scope is scope, for the quota:
// [WithCaller]'s function, or by default what authenticates r (see
// [WithCaller]).
func (c *config) callerOf(r *http.Request, scope string) string {
	if c.caller != nil {
		return "caller\x00" + c.caller(r)
	}
	if a := r.Header.Values("Authorization"); len(a) > 0 {
		return "authorization\x00" + a[0]
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		sum := sha256.Sum256(r.TLS.PeerCertificates[0].Raw)
		return "certificate\x00" + string(sum[:])
	}
	return "scope\x00" + scope
}

// quota counts the keys each caller holds in the store, in this process: a
// key from the first request that used it until the TTL after its last run,
// or until its request ends having stored nothing ([quota.release]). A
// caller holding perCaller keys, or all callers holding total, is refused
// new ones until some expire; keys it holds pass. Callers and keys are kept
// as hashes, about 50 bytes a key.
type quota struct {
	perCaller, total int   // 0: no bound
	ttl              int64 // nanoseconds
	now              func() time.Time
	seed             maphash.Seed

	mu      sync.Mutex
	callers map[uint64]*callerKeys
	held    int   // keys held by every caller
	next    int64 // no key of any caller expires before it
	stale   bool  // next may be earlier than the first expiry
	added   int   // keys added since the last sweep
}

// callerKeys are the keys one caller holds, each with its expiry.
type callerKeys struct {
	keys  map[uint64]int64
	next  int64 // no key expires before it
	stale bool  // next may be earlier than the first expiry
}

// newQuota returns the quota of c over st, or nil if there is none.
func newQuota(c *config, st dedupe.Store) *quota {
	perCaller, total := c.limits(st)
	if perCaller == 0 && total == 0 {
		return nil
	}
	return &quota{perCaller: perCaller, total: total, ttl: int64(c.ttl), now: c.now,
		seed: maphash.MakeSeed(), callers: make(map[uint64]*callerKeys)}
}

// admit counts the key whose id is id for caller, unless it is new and the
// caller or the store has no room: then it returns false and the time until
// the first of the keys in its way expires. A key it counted anew is
// returned as a ticket (non-zero) for [quota.release].
func (q *quota) admit(caller, id string) (ok bool, wait time.Duration, ticket int64) {
	ch, kh := maphash.String(q.seed, caller), maphash.String(q.seed, id)
	now := q.now().UnixNano()
	q.mu.Lock()
	defer q.mu.Unlock()
	ck := q.callers[ch]
	if ck != nil {
		if exp, ok := ck.keys[kh]; ok && now < exp {
			return true, 0, 0
		}
		if q.perCaller > 0 && len(ck.keys) >= q.perCaller && (now >= ck.next || ck.stale) {
			q.purge(ck, now)
		}
		if q.perCaller > 0 && len(ck.keys) >= q.perCaller {
			return false, time.Duration(ck.next - now), 0
		}
	}
	if q.total > 0 && q.held >= q.total && (now >= q.next || q.stale) || q.added >= max(q.held, 1024) {
		q.sweep(now)
		ck = q.callers[ch]
	}
	if q.total > 0 && q.held >= q.total {
		return false, time.Duration(q.next - now), 0
	}
	if ck == nil {
		ck = &callerKeys{keys: make(map[uint64]int64)}
		q.callers[ch] = ck
	}
	exp := now + q.ttl
	q.put(ck, kh, exp)
	return true, 0, exp
}

// hold counts the key whose id is id for caller until the TTL from now,
// whatever the room: the expiry of the marks its run wrote, or of a key the
// store holds already (kept by an earlier process).
func (q *quota) hold(caller, id string) {
	ch, kh := maphash.String(q.seed, caller), maphash.String(q.seed, id)
	now := q.now().UnixNano()
	q.mu.Lock()
	defer q.mu.Unlock()
	ck := q.callers[ch]
	if ck == nil {
		ck = &callerKeys{keys: make(map[uint64]int64)}
		q.callers[ch] = ck
	}
	q.put(ck, kh, now+q.ttl)
}

// release gives back the share of the key whose id is id that admit
// counted for caller with ticket, when its request stored nothing: unless
// another request of the key counted it since (hold, or admit again).
func (q *quota) release(caller, id string, ticket int64) {
	ch, kh := maphash.String(q.seed, caller), maphash.String(q.seed, id)
	q.mu.Lock()
	defer q.mu.Unlock()
	ck := q.callers[ch]
	if ck == nil || ck.keys[kh] != ticket {
		return
	}
	delete(ck.keys, kh)
	q.held--
	ck.stale = ck.stale || ticket == ck.next
	q.stale = q.stale || ticket == q.next
}

// put sets the expiry of key kh of ck. q.mu must be held.
func (q *quota) put(ck *callerKeys, kh uint64, exp int64) {
	old, ok := ck.keys[kh]
	if !ok {
		q.held++
		q.added++
		if len(ck.keys) == 0 || exp < ck.next {
			ck.next = exp
		}
		if q.held == 1 || exp < q.next {
			q.next = exp
		}
	} else if old != exp {
		ck.stale = ck.stale || old == ck.next
		q.stale = q.stale || old == q.next
	}
	ck.keys[kh] = exp
}

// purge drops the expired keys of ck and settles ck.next to the first
// expiry. q.mu must be held.
func (q *quota) purge(ck *callerKeys, now int64) {
	ck.next, ck.stale = 0, false
	for k, exp := range ck.keys {
		switch {
		case now >= exp:
			delete(ck.keys, k)
			q.held--
		case ck.next == 0 || exp < ck.next:
			ck.next = exp
		}
	}
}

// sweep purges every caller, drops the empty ones and settles q.next. q.mu
// must be held.
func (q *quota) sweep(now int64) {
	q.next, q.stale, q.added = 0, false, 0
	for h, ck := range q.callers {
		q.purge(ck, now)
		if len(ck.keys) == 0 {
			delete(q.callers, h)
			continue
		}
		if q.next == 0 || ck.next < q.next {
			q.next = ck.next
		}
	}
}
