package dedupe

import "errors"

// Errors returned by this package and its stores. Match them with [errors.Is]:
// stores wrap them with detail.
var (
	// ErrInvalidKey reports a key or claim token that cannot be stored (see
	// [Key.Validate], [Claim.Validate]), or an id that lost digits in a float64.
	ErrInvalidKey = errors.New("dedupe: invalid key")
	// ErrNoMessageID reports a parsed message with no usable platform message id.
	ErrNoMessageID = errors.New("dedupe: no message id")
	// ErrNotOwner reports a Release or Extend of a claim that no longer holds
	// its key.
	ErrNotOwner = errors.New("dedupe: claim not held")
	// ErrStoreFull reports a Claim refused because the store holds as many
	// claims as it may ([MemoryConfig].MaxClaims); nothing was claimed.
	ErrStoreFull = errors.New("dedupe: store full of claims")
	// ErrClosed reports a call on a closed store.
	ErrClosed = errors.New("dedupe: store closed")
	// ErrReadOnly reports a write refused by a store opened read-only
	// ([SQLiteConfig].ReadOnly, the postgres module's Config.ReadOnly).
	ErrReadOnly = errors.New("dedupe: store opened read-only")
	// ErrDuplicate is returned by [Deduper.Do] for a message processed
	// already: acknowledge the delivery and drop it.
	ErrDuplicate = errors.New("dedupe: duplicate message")
	// ErrInFlight is returned by [Deduper.Do] for a message another caller is
	// processing right now.
	ErrInFlight = errors.New("dedupe: message in flight")
	// ErrTooLarge reports a result longer than [MaxResultSize], which a
	// [Store.MarkResult] refused, and is an [Observation]'s error for an event
	// whose canonical form is longer than 1 MiB: it was not correlated.
	ErrTooLarge = errors.New("dedupe: too large")
	// ErrPayloadMismatch is returned by [Deduper.Do] (wrapped with
	// [ErrDuplicate]) for a copy of a processed message whose payload
	// differs from the one the message was processed with
	// ([WithPayloadCheck]): fn was not run.
	ErrPayloadMismatch = errors.New("dedupe: payload differs from the processed copy's")
)
