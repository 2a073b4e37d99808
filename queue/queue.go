package queue

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Defaults of the queues.
const (
	// DefaultVisibility is how long a [Queue] of this module hides a delivery
	// it handed out before another taker may take it again, when its config
	// leaves it zero. A worker renews it while it processes the message.
	DefaultVisibility = 30 * time.Second
	// DefaultRetention is how long a queue of this module keeps the state of
	// a message that is done or failed, when its config leaves it zero.
	DefaultRetention = time.Hour
	// DefaultPollInterval is how often a queue of this module that cannot be
	// woken by another process (SQLite, PostgreSQL) or blocks on the server
	// (Redis) looks for work when it has none, when its config leaves it
	// zero. A message pushed by the same process wakes a waiting taker at
	// once.
	DefaultPollInterval = 500 * time.Millisecond
)

// Errors of the queues. Match them with [errors.Is].
var (
	// ErrClosed reports a call on a closed [Queue], and a Take that was
	// waiting when the queue was closed.
	ErrClosed = errors.New("dedupe: queue: closed")
	// ErrStaleDelivery reports an update of a [Delivery] that its taker no
	// longer holds: its visibility timeout ran out and it was taken again,
	// or it was settled already.
	ErrStaleDelivery = errors.New("dedupe: queue: delivery no longer held")
	// ErrFull reports a Push refused because the queue holds as many live
	// messages as its depth bound allows. Nothing was stored; the message
	// may be pushed again once the queue has drained.
	ErrFull = errors.New("dedupe: queue: full")
)

// Queue holds accepted webhook deliveries until a worker has processed them:
// the Async of package dedupehttp, given one with its WithQueue or
// WithOverflow option, answers 202 Accepted only after Push returned, so a
// queue that keeps its entries in a file or a server ([OpenSQLite], and the
// Redis Streams and PostgreSQL queues of the deduperedis and postgres
// modules) loses no accepted message when the process dies; [Memory] keeps
// them in memory and loses them.
//
// A message is queued, then taken by one worker (processing), then done or
// failed; a failed message may be requeued by hand. A taken message is hidden from other takers for its visibility
// timeout, which the taker renews with Update while it works: if the taker
// dies, the message becomes visible again when the timeout runs out and
// another worker, in this process or another, takes it. A queue holds at most
// one live (queued or processing) message per [dedupe.Key]; that is how
// an Async answers a copy of a message still in the queue without queuing it
// twice. Exactly-once processing does not rest on the queue, which may hand a
// message out again: the worker claims the key with the [dedupe.Deduper]
// before it runs the handler, and a message whose key is marked already is
// settled without running it.
//
// One queue (one file, stream or table) serves one Async and its replicas in
// other processes: every taker runs the same handler. Implementations are
// safe for concurrent use. The conformance suite in package
// queue/queuetest states this contract as tests.
type Queue interface {
	// Push stores m as queued, visible at once, unless a live message with
	// m.Key is in the queue: it then returns that message's id and added
	// false, and stores nothing. A queue given a depth bound refuses a new
	// message with [ErrFull] when it holds that many live messages. When
	// Push returns nil the message is as durable as the queue makes it. m.ID
	// must be unique.
	Push(ctx context.Context, m Message) (id string, added bool, err error)

	// Take waits until a message is visible, hides it for the visibility
	// timeout and returns it as processing. It returns ctx's error when ctx
	// is done and [ErrClosed] when the queue is closed first.
	Take(ctx context.Context) (Delivery, error)

	// Update moves a taken delivery on as c says (see [Change]). Every
	// change but to [StateDone] requires that d is still the message's
	// latest take, and otherwise returns [ErrStaleDelivery] and changes
	// nothing; done settles the message whoever took it last, since it was
	// processed.
	Update(ctx context.Context, d Delivery, c Change) error

	// Status returns the state of the message with id. A done or failed
	// message is kept for the queue's retention, then forgotten: ok is then
	// false, as for an id the queue never held.
	Status(ctx context.Context, id string) (e Entry, ok bool, err error)

	// Count returns how many messages are live (queued or processing) and
	// how many failed within the retention.
	Count(ctx context.Context) (Counts, error)

	// Failed returns up to limit of the messages that failed within the
	// retention (the dead letters), the latest first, each with its
	// [Entry].Reason. limit <= 0 means 100.
	Failed(ctx context.Context, limit int) ([]Entry, error)

	// Requeue moves the failed message with id back to queued, visible at
	// once, with its attempts set to zero: for a dead letter whose cause was
	// fixed. It returns false, and changes nothing, if id is not a failed
	// message the queue still keeps, or if a live message with its key is in
	// the queue (that one will be processed). It does not check a depth
	// bound: an operator's requeue is never refused as full.
	Requeue(ctx context.Context, id string) (bool, error)

	// Close releases the queue's resources and wakes every Take with
	// [ErrClosed]; it may be called more than once. Entries stay where
	// a durable queue keeps them.
	Close() error
}

// State is the state of a queued message.
type State int

// States of a queued message.
const (
	// StateQueued: accepted, waiting for a worker.
	StateQueued State = iota + 1
	// StateProcessing: a worker took it.
	StateProcessing
	// StateDone: processed and marked, or found processed already.
	StateDone
	// StateFailed: the handler failed on the last attempt allowed, or its
	// workers died on it as often (a dead letter); the message was not
	// marked. [Queue.Failed] lists these, [Queue.Requeue] puts one back.
	StateFailed
)

// String returns the state in lower case: "queued", "processing", "done" or
// "failed".
func (s State) String() string {
	switch s {
	case StateQueued:
		return "queued"
	case StateProcessing:
		return "processing"
	case StateDone:
		return "done"
	case StateFailed:
		return "failed"
	}
	return "unknown"
}

// Live reports whether s is queued or processing.
func (s State) Live() bool { return s == StateQueued || s == StateProcessing }

// Message is one accepted delivery as a [Queue] stores it: what the handler
// needs to serve it again in any process. It is plain data.
type Message struct {
	// ID is the queue id, sent to the platform in [HeaderQueueID].
	ID string
	// Key is the message's key.
	Key dedupe.Key
	// Method, Target (the request target: path and query) and Host are the
	// request's.
	Method, Target, Host string
	// Header holds the request headers that were queued with it (see
	// dedupehttp's WithQueuedHeaders).
	Header Header
	// Body is the body the handler reads: once authenticated, the
	// authenticated one (for an encrypted Feishu delivery, the plaintext).
	Body []byte
	// TraceID is the request's [dedupe.TraceID], or "".
	TraceID string
	// Accepted is when the request was accepted.
	Accepted time.Time
}

// Header holds a queued request's headers by canonical name, as an
// http.Header does: the two convert to each other (http.Header(h),
// Header(r.Header)). It is a type of this package so that a queue's stores,
// the Redis and PostgreSQL ones among them, do not depend on net/http.
type Header map[string][]string

// Clone returns a deep copy of h, or nil if h is nil.
func (h Header) Clone() Header {
	if h == nil {
		return nil
	}
	c := make(Header, len(h))
	for name, vs := range h {
		c[name] = slices.Clone(vs)
	}
	return c
}

// Delivery is a message handed out by [Queue.Take].
type Delivery struct {
	Message
	// Attempt is the message's attempts, this take included: 1 at the first
	// take; each later take adds one, but for the takes given back with
	// [Change].NotRun. A take counts when it is made, before any handler
	// runs, so a message whose worker dies on it (killed, out of memory)
	// reaches its worker's limit of attempts all the same.
	Attempt int
	// Receipt identifies this take; the queue compares it in Update.
	Receipt string
	// Visibility is how long the take hides the message, and each
	// Update to [StateProcessing] with After <= 0.
	Visibility time.Duration
}

// Change is what [Queue.Update] does to a taken delivery. An implementation
// may cap After at its visibility timeout.
type Change struct {
	// State is the state the message moves to:
	//   - [StateProcessing]: still being processed; hidden for After more
	//     (After <= 0: the visibility timeout).
	//   - [StateQueued]: put back, visible again after After (<= 0: at once).
	//   - [StateFailed]: settled as failed, for Reason. A failed message
	//     keeps its request, for [Queue.Requeue], for the retention.
	//   - [StateDone]: settled as done.
	State State
	// After is how long the message stays hidden (see State).
	After time.Duration
	// NotRun, with [StateQueued], gives the take back: no handler ran on it
	// (the key was in flight elsewhere, the store failed, the worker was
	// stopping), so it does not count in the message's attempts.
	NotRun bool
	// Reason, with [StateFailed], tells why the message failed, for
	// [Entry].Reason.
	Reason string
}

// Entry is what [Queue.Status] knows of a message.
type Entry struct {
	// ID is the message's queue id and Key its key.
	ID  string
	Key dedupe.Key
	// State is where the message is.
	State State
	// Attempts is how many takes counted (see [Delivery].Attempt).
	Attempts int
	// Accepted is when it was pushed, Updated when its state last changed,
	// each by the queue's clock.
	Accepted, Updated time.Time
	// Reason is why a failed message failed, or "".
	Reason string
}

// Counts is what [Queue.Count] counts.
type Counts struct {
	// Live counts the queued and processing messages: the queue's depth.
	Live int
	// Failed counts the messages that failed within the retention.
	Failed int
}

// DefaultFailedLimit is how many entries [Queue.Failed] returns when its
// limit is zero or less.
const DefaultFailedLimit = 100

// capAfter returns after, or def if after <= 0, at most limit.
func capAfter(after, def, limit time.Duration) time.Duration {
	if after <= 0 {
		after = def
	}
	return min(after, limit)
}
