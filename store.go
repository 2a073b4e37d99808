package dedupe

import (
	"context"
	"fmt"
	"time"
)

// Default durations used when a store or a [Deduper] is given a zero or negative one.
const (
	DefaultTTL   = 24 * time.Hour  // outlasts every preset platform's redeliveries
	DefaultLease = 5 * time.Minute // a crashed gateway's claim runs out after it
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

	// Backend names the kind of store: "memory", "sqlite", "redis", "postgres".
	Backend() string

	// Close releases the store's resources. It may be called more than once.
	Close() error
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
