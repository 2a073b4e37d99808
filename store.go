package dedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe/batch"
)

// Default durations used when a store or a [Deduper] is given a zero or negative one.
const (
	DefaultTTL   = 24 * time.Hour  // outlasts every preset platform's redeliveries
	DefaultLease = 5 * time.Minute // a store's claim with no lease given, which nothing renews, runs out after it (a Deduper's is shorter: [WithLease])
)

// Store remembers which messages were processed (marks) and which are being
// processed (claims). Every store in this module is safe for concurrent use,
// honours a cancelled context and treats an expired mark or claim as absent.
// Invalid keys and tokens are refused with [ErrInvalidKey]; after Close every
// method returns [ErrClosed]. A store never evicts a live claim to make room;
// it refuses a claim it cannot hold with [ErrStoreFull]. Package dedupetest
// states this contract as tests.
type Store interface {
	// Exists reports whether key is marked and its TTL has not passed; a
	// claim does not exist. Exists then Mark is two steps, and two concurrent
	// copies can both see false and both be processed: use Claim (or
	// [Deduper.Do]) when copies may arrive at once.
	Exists(ctx context.Context, key Key) (bool, error)

	// Mark records key as processed for ttl (ttl <= 0: the store's default),
	// replacing any expiry and clearing any claim on key.
	Mark(ctx context.Context, key Key, ttl time.Duration) error

	// Claim atomically takes c.Key for c.Token, for lease (lease <= 0: the
	// store's default). It returns [Duplicate] if the key is marked, [InFlight]
	// if a claim with another token holds it, and otherwise [Claimed]. It is
	// idempotent by token: finding the key held by c.Token is [Claimed], with
	// the lease set anew. So after an error that leaves it unknown whether the
	// claim was written, retry with the same c, or Release(c).
	Claim(ctx context.Context, c Claim, lease time.Duration) (Status, error)

	// Extend renews c's lease to lease from now (lease <= 0: the default) if c
	// still holds its key, and otherwise returns [ErrNotOwner].
	Extend(ctx context.Context, c Claim, lease time.Duration) error

	// Release drops c's claim if c still holds its key, so the key can be
	// claimed again at once, and otherwise returns [ErrNotOwner].
	Release(ctx context.Context, c Claim) error

	// MarkResult is Mark, also keeping result with the mark, so that
	// [Deduper.DoResult] hands the first run's result to its copies; an empty
	// result is kept as none. A result longer than [MaxResultSize] is refused
	// with [ErrTooLarge] and nothing is written. A later Mark of key drops the
	// result with the old mark. A result expires with its mark; a store may
	// keep it for less (the memory store bounds the bytes it holds), after
	// which Result reports the key marked without one.
	MarkResult(ctx context.Context, key Key, result []byte, ttl time.Duration) error

	// Result returns the result kept with key's mark. marked is false if key
	// is not marked (a claim is not a mark); result is nil if it is marked
	// without one. The caller may keep result: it is not the store's.
	Result(ctx context.Context, key Key) (result []byte, marked bool, err error)

	// Backend names the kind of store: "memory", "sqlite", "redis", "postgres".
	Backend() string

	// Close releases the store's resources. It may be called more than once.
	Close() error
}

// MaxResultSize is the longest result, in bytes, that a [Store] keeps with a
// mark ([Store.MarkResult]): 64 KiB, room for a chat reply or a webhook's
// answer.
const MaxResultSize = 64 << 10

// checkResult returns the error MarkResult refuses res with, or nil.
func checkResult(backend string, key Key, res []byte) error {
	if len(res) > MaxResultSize {
		return fmt.Errorf("dedupe: %s: mark %s: result of %d bytes, over %d: %w", backend, key, len(res), MaxResultSize, ErrTooLarge)
	}
	return nil
}

// What a store can do beyond [Store] is declared here, each as an interface
// of its own that a store implements by having the methods; who uses it is
// said in its first line. Package dedupetest has a group of tests for each,
// which its Run runs on every store that implements it (but for TxStore,
// generic, whose tests a store runs with its RunTx). The stores of this
// repository implement them as follows (a mark means yes; for TxStore, the
// Tx):
//
//	            Lister BulkMarker BatchStore Counter Sizer MinLeaser TxStore Evicter Forgetter
//	memory        x        x          x         x                             x         x
//	sqlite        x        x          x         x      x             *sql.Tx            x
//	redis         x        x          x         x            x                          x
//	postgres      x        x          x         x      x             pgx.Tx             x
//
// The Redis store's MinLease is 0 but on a Redis Cluster, where it is the
// store's ClusterRetry (12 s by default). [LayeredStore] and the fallback of
// [WithFallback] are Stores made of other stores: they implement only
// [Store], but for LayeredStore's [BatchStore], which answers the keys its
// front layers hold and sends the rest to its last layer at once. A
// [Deduper.DoEach] with a fallback asks it one key at a time, concurrently,
// so that its per-key decisions (the local claim, the breaker) hold. The
// Store of package dedupeotel, which wraps one, is also a [MinLeaser] that
// answers for it (0 for a store that is not one), and a [BatchStore]
// whatever it wraps: a store that is not one it calls per key,
// concurrently, as [Deduper.DoEach] would. LayeredStore and the Store of
// dedupeotel are also [Forgetter]s, whose Forget fails with
// [errors.ErrUnsupported] when a store they are made of is not one.

// Lister is a store that can walk its marks: [migrate.Copy] and the dedupe
// command's migrate and stats use it.
type Lister interface {
	// ListMarks calls yield with about limit marks of the store that follow
	// cursor ("" for the first page), each with its expiry: an absolute time on
	// the local clock, or the zero time for a mark that never expires. A page
	// holds at most limit marks, but for a store that walks with a scan whose
	// steps it cannot split (Redis's SCAN): it holds what its last step found
	// too. It yields every mark the store holds, expired ones not yet deleted
	// included, and never a claim. It returns the cursor of the next page, ""
	// after the last; a page may be shorter than limit, even empty, before the
	// last. The cursor is the store's own text (the last key, for the stores
	// that walk in key order): a walk resumed from it yields every mark that
	// it had not yet yielded and that still exists, and may yield some again.
	// Keys are split at their first ':' but not validated.
	ListMarks(ctx context.Context, cursor string, limit int, yield func(key Key, expires time.Time)) (next string, err error)
}

// BulkMarker is a store that can write a batch of marks at once, each with its
// own expiry: [migrate.Copy] uses it.
type BulkMarker interface {
	// MarkUntil marks keys[i] until expires[i], an absolute time on the local
	// clock in the future, for every i, and returns how many of the keys had
	// a live mark already. Such a mark keeps the later of its expiry and
	// expires[i], and its result; a claim on a key is replaced by the mark.
	// The keys are valid and distinct, and len(keys) == len(expires). An
	// error means that some, all or none of the batch was written: writing it
	// again is harmless.
	MarkUntil(ctx context.Context, keys []Key, expires []time.Time) (present int, err error)
}

// BatchStore is a store that claims, renews, marks and releases many keys
// in one round trip each (a transaction, a pipeline per hash slot, one SQL
// statement): [Deduper.DoEach] uses it, and calls a store that is not one
// once per key, concurrently. Each method is its one-key peer applied to
// every item in order, with the same validation, TTL and lease defaults and
// errors, and returns one error per item (nil for success):
//   - The items are independent: an invalid key or token, a result over
//     [MaxResultSize] or a claim not held is refused alone ([ErrInvalidKey],
//     [ErrTooLarge], [ErrNotOwner]), and the others are done.
//   - Items on one key are done in their order: a second claim of a key with
//     another token is [InFlight] (with the same token, [Claimed] again).
//   - A failure of a round trip (the server unreachable, ctx done) is the
//     error of every item it carried, and leaves each as unknown as the
//     one-key call's error would: retrying the same claims is safe.
//   - A batch of any length is taken: a store splits one longer than it
//     sends at once into several round trips.
type BatchStore interface {
	// ClaimEach is [Store.Claim] for each claims[i], for lease.
	ClaimEach(ctx context.Context, claims []Claim, lease time.Duration) ([]Status, []error)
	// ExtendEach is [Store.Extend] for each claims[i], for lease.
	ExtendEach(ctx context.Context, claims []Claim, lease time.Duration) []error
	// ReleaseEach is [Store.Release] for each claims[i].
	ReleaseEach(ctx context.Context, claims []Claim) []error
	// MarkEach is [Store.MarkResult] for each keys[i] with results[i], for
	// ttl, and [Store.Mark] where results is nil or results[i] is empty. If
	// results is neither nil nor as long as keys, every item is refused with
	// [ErrInvalidKey].
	MarkEach(ctx context.Context, keys []Key, results [][]byte, ttl time.Duration) []error
}

// Counter is a store that can count what it holds: [migrate.Stats] and the
// dedupe command's stats use it.
type Counter interface {
	// CountLive returns the numbers of live marks and live claims, and the
	// earliest and latest expiry of the live marks that expire, on the local
	// clock (zero times when there are none).
	CountLive(ctx context.Context) (marks, claims int64, oldest, newest time.Time, err error)
}

// Sizer is a store kept in tables or files: [migrate.Stats] and the dedupe
// command's stats use it.
type Sizer interface {
	// Sizes returns the bytes each of the store's tables, partitions or files
	// takes, by name.
	Sizes(ctx context.Context) (map[string]int64, error)
}

// MinLeaser is a store that needs leases of a least length to keep its
// promise through its own failures: [New] warns when the lease is shorter.
type MinLeaser interface {
	// MinLease returns the shortest lease that outlasts the store's failover
	// (a Redis Cluster's: its node timeout and the replica's promotion).
	MinLease() time.Duration
}

// Evicter is a store that holds a bounded number of marks and evicts marks,
// live ones too, to take new ones beyond it: [Stats].Evicted and package
// idempotency's quota use it. A live mark evicted makes its key new again
// before its TTL ran out.
type Evicter interface {
	// MaxMarks returns the most marks the store holds. It may evict before
	// it holds that many (a sharded store evicts when a key's shard is full).
	MaxMarks() int
	// Evicted returns the number of marks the store evicted before their
	// TTL ran out.
	Evicted() uint64
}

// Forgetter is a store that can drop a key's mark on an operator's word, so
// that the message is processed again (after a bug fix, say): the dedupe
// command's forget uses it. A store does not log a Forget: the caller that
// decides to forget does (the dedupe command logs each key it forgot, and
// who and when, to its standard error).
type Forgetter interface {
	// Forget drops key's mark and the result kept with it, so that the next
	// Claim of key is [Claimed]. forgotten reports whether key held a live
	// mark; a key that holds none (absent, expired, or holding only a claim
	// released) is (false, nil). A key held by a live claim is refused with
	// an error wrapping [ErrInFlight], and nothing is changed; the check and
	// the drop are one atomic step, so a claim taken meanwhile is never
	// dropped. Invalid keys are refused with [ErrInvalidKey], calls on a
	// closed store with [ErrClosed], on a read-only store with
	// [ErrReadOnly]. A Forget retried after an error whose outcome is
	// unknown is harmless: it finds the key forgotten and says false.
	Forget(ctx context.Context, key Key) (forgotten bool, err error)
}

// TxStore is a store kept in a database whose transactions the caller can
// write in, Tx being the database's transaction type: the caller's handler
// uses it to commit its effect and the key's mark together.
type TxStore[Tx any] interface {
	// DoTx runs fn once in effect for key: in one transaction of the
	// store's database it writes key's mark and runs fn with the
	// transaction, then commits, so that fn's writes and the mark commit
	// together or not at all, even if the process dies at any instant. A
	// marked or claimed key gets [ErrDuplicate] or [ErrInFlight] without
	// running fn; fn's error or panic rolls the transaction back.
	DoTx(ctx context.Context, key Key, fn func(ctx context.Context, tx Tx) error) error
}

// Status is the outcome of [Store.Claim].
type Status int

// Claim outcomes.
const (
	Claimed   Status = iota + 1 // the caller holds the key: process the message
	Duplicate                   // the key is marked: the message was processed
	InFlight                    // another claim holds the key
)

// String returns "claimed", "duplicate" or "in_flight".
func (s Status) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case Duplicate:
		return "duplicate"
	case InFlight:
		return "in_flight"
	}
	return "unknown"
}

// Claim names one claim on a message: its key and the token that proves
// ownership. The caller makes it with [NewClaim] before asking a store, so the
// token is known even if the answer is lost.
type Claim struct {
	Key   Key
	Token string
}

// maxTokenLen is the longest claim token a store accepts, in bytes.
const maxTokenLen = 64

// Validate reports whether c can be stored: a valid key and a token of 1 to
// 64 bytes of printable ASCII without spaces. The error wraps [ErrInvalidKey].
func (c Claim) Validate() error {
	if err := c.Key.Validate(); err != nil {
		return err
	}
	if !validToken(c.Token) {
		return fmt.Errorf("%w: claim token %q is not 1 to %d bytes of printable ASCII", ErrInvalidKey, c.Token, maxTokenLen)
	}
	return nil
}

func validToken(t string) bool {
	if t == "" || len(t) > maxTokenLen {
		return false
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// checkCall returns the error a store call with key fails with before it
// does anything: [ErrClosed] once closed is true, the context's error, or the
// key's. Memory and SQLite stores share it.
func checkCall(ctx context.Context, closed bool, key Key) error {
	if closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return key.Validate()
}

// checkClaimCall is checkCall for Extend and Release: a claim with a token no
// store can have made is refused with [ErrNotOwner], without a lookup.
func checkClaimCall(ctx context.Context, closed bool, c Claim) error {
	if err := checkCall(ctx, closed, c.Key); err != nil {
		return err
	}
	if !validToken(c.Token) {
		return fmt.Errorf("%w: %s: not a claim token", ErrNotOwner, c.Key)
	}
	return nil
}

// decider is a Store made of other stores that can say which of them decided
// a claim: [LayeredStore] names its layers, the fallback of [WithFallback]
// names itself when it served alone. The Deduper logs the name as "layer".
type decider interface {
	Store
	// claimBy is Claim, and also names the part that decided ("" for none).
	claimBy(ctx context.Context, c Claim, lease time.Duration) (Status, string, error)
}

// fronted is a Store with fast front parts that answer copies without a
// round trip to the authoritative one: [LayeredStore]. The fallback of
// [WithFallback] uses it to answer copies before its own claim, and to keep
// the front answering while the authoritative mark is queued.
type fronted interface {
	// frontMarked reports whether a front part holds key's mark, and names it.
	frontMarked(ctx context.Context, key Key) (string, bool)
	// markFront marks key on the front parts only, for ttl or their shorter
	// windows.
	markFront(ctx context.Context, key Key, res []byte, ttl time.Duration)
}

// eachStore returns the batch calls of st: st's own if it is a [BatchStore],
// and otherwise perKey's.
func eachStore(st Store) BatchStore {
	if b, ok := st.(BatchStore); ok {
		return b
	}
	return perKey{st}
}

// perKey is a [BatchStore] made of a Store's one-key calls, up to
// eachWidth at once; the items on one key go one after another, in order.
type perKey struct{ st Store }

// eachWidth bounds the concurrent calls of perKey.
const eachWidth = 64

func (p perKey) ClaimEach(ctx context.Context, claims []Claim, lease time.Duration) ([]Status, []error) {
	status, errs := make([]Status, len(claims)), make([]error, len(claims))
	batch.InOrder(len(claims), func(n int) Key { return claims[n].Key }, eachWidth, func(n int) {
		status[n], errs[n] = p.st.Claim(ctx, claims[n], lease)
	})
	return status, errs
}

func (p perKey) ExtendEach(ctx context.Context, claims []Claim, lease time.Duration) []error {
	errs := make([]error, len(claims))
	batch.InOrder(len(claims), func(n int) Key { return claims[n].Key }, eachWidth, func(n int) { errs[n] = p.st.Extend(ctx, claims[n], lease) })
	return errs
}

func (p perKey) ReleaseEach(ctx context.Context, claims []Claim) []error {
	errs := make([]error, len(claims))
	batch.InOrder(len(claims), func(n int) Key { return claims[n].Key }, eachWidth, func(n int) { errs[n] = p.st.Release(ctx, claims[n]) })
	return errs
}

func (p perKey) MarkEach(ctx context.Context, keys []Key, results [][]byte, ttl time.Duration) []error {
	errs := make([]error, len(keys))
	if results != nil && len(results) != len(keys) {
		for n := range errs {
			errs[n] = fmt.Errorf("%w: %d results for %d keys", ErrInvalidKey, len(results), len(keys))
		}
		return errs
	}
	batch.InOrder(len(keys), func(n int) Key { return keys[n] }, eachWidth, func(n int) {
		var res []byte
		if results != nil {
			res = results[n]
		}
		errs[n] = markWith(ctx, p.st, keys[n], res, ttl)
	})
	return errs
}
