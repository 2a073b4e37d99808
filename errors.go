package dedupe

import "errors"

// Errors returned by this package and its stores. Match them with [errors.Is]:
// stores wrap them with detail.
var (
	// ErrInvalidKey reports a key that cannot be stored: an empty channel or message
	// id, a channel containing ':', text that is not UTF-8 or holds control
	// characters, a part longer than its limit, or an id that lost digits in a
	// float64. It also reports a claim token that is empty or not printable
	// ASCII (see [Claim.Validate]).
	ErrInvalidKey = errors.New("dedupe: invalid key")
	// ErrNoMessageID reports a parsed message with no usable platform message id.
	ErrNoMessageID = errors.New("dedupe: no message id")
	// ErrNotOwner reports a Release or Extend by a claim that no longer holds its
	// key: its lease ran out, the key was marked, or another claim took it.
	ErrNotOwner = errors.New("dedupe: claim not held")
	// ErrStoreFull reports a Claim refused because the store holds as many
	// live claims as it may (see [MemoryConfig].MaxClaims). Nothing was
	// claimed; [Deduper.Do] fails closed, so the platform's retry comes back.
	ErrStoreFull = errors.New("dedupe: store full of claims")
	// ErrClosed reports a call on a closed store.
	ErrClosed = errors.New("dedupe: store closed")
	// ErrDuplicate is returned by [Deduper.Do] for a message that was already
	// processed. The caller should acknowledge the delivery and drop it.
	ErrDuplicate = errors.New("dedupe: duplicate message")
	// ErrInFlight is returned by [Deduper.Do] for a message another caller is
	// processing right now. The owner will finish or release it.
	ErrInFlight = errors.New("dedupe: message in flight")
)
