package dedupe

import (
	"context"
	"time"
)

// Default durations used when a store or a [Deduper] is given a zero or negative one.
const (
	// DefaultTTL is how long a mark lasts when no TTL is configured. It outlasts the
	// redelivery window of every platform this library has a preset for.
	DefaultTTL = 24 * time.Hour
	// DefaultLease is how long a claim holds a key when no lease is configured.
	DefaultLease = 5 * time.Minute
)

// Store remembers which messages were processed (marks) and which are being
// processed (claims). Every implementation in this module is safe for concurrent
// use, honours a cancelled context, and treats an expired mark or claim as absent
// in every method. Invalid keys are refused with [ErrInvalidKey] and store nothing;
// after Close every method returns [ErrClosed].
//
// The conformance suite in package dedupetest states this contract as tests.
type Store interface {
	// Exists reports whether key was marked and its TTL has not passed.
	// A claim in flight does not exist.
	Exists(ctx context.Context, key Key) (bool, error)

	// Mark records key as processed for ttl (ttl <= 0: the store's default TTL).
	// Marking again replaces the expiry. Marking clears any claim on key.
	Mark(ctx context.Context, key Key, ttl time.Duration) error

	// Claim atomically takes key for lease (lease <= 0: the store's default
	// lease). The result's Status is [Duplicate] if key is marked, [InFlight] if
	// another unexpired claim holds it, and otherwise [Claimed], with a Token unique
	// to this claim. When a lease runs out the key can be claimed again.
	Claim(ctx context.Context, key Key, lease time.Duration) (Claim, error)

	// Extend renews the lease of a claim that still holds its key, to lease from
	// now (lease <= 0: the store's default lease). It returns [ErrNotOwner] if the
	// claim no longer holds the key.
	Extend(ctx context.Context, c Claim, lease time.Duration) error

	// Release drops a claim that still holds its key, so the key can be claimed
	// again at once. It returns [ErrNotOwner] if the claim's lease ran out, the key
	// was marked, or another claim holds it; nothing else is touched.
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
	// Claimed means the caller now holds the key and should process the message.
	Claimed Status = iota + 1
	// Duplicate means the key is marked: the message was already processed.
	Duplicate
	// InFlight means another caller holds an unexpired claim on the key.
	InFlight
)

// String returns the status in lower case ("claimed", "duplicate", "in_flight").
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

// Claim is the result of [Store.Claim]. Only a claim whose Status is [Claimed]
// carries a Token, which [Store.Extend] and [Store.Release] check.
type Claim struct {
	Key    Key
	Status Status
	Token  string
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

// orDefault returns d if it is positive, and def otherwise: the rule that a
// TTL or lease of zero or less means the store's default.
func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
