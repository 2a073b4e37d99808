package dedupehttp

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Stats counts what the middleware decided itself; the [dedupe.Deduper]
// counts the rest (processed, duplicates, copies in flight,
// releases) in [dedupe.Stats]. Each [Handler] and [Async] has its own.
type Stats struct {
	// Unauthenticated counts deliveries refused with 401 because they failed
	// the preset's authentication (see [WithVerify]).
	Unauthenticated uint64
	// Undeduplicated counts deliveries without a usable message id that are
	// not protocol requests: served without deduplication, or refused with
	// 400 under [WithRefuseUndeduplicated]; and the events of a batch
	// ([Events], [NewAsyncEvents]) without one, served or refused alone.
	Undeduplicated uint64
	// Protocol counts protocol requests (URL verification, PING, heartbeat),
	// passed to the handler without deduplication or answered by the
	// middleware (QQ's callback URL validation).
	Protocol uint64
	// Malformed counts deliveries refused with 400 because their body is not
	// the platform's JSON or their id is invalid, and the events of a batch
	// refused alone for the same reasons.
	Malformed uint64
	// PanicsAfterSuccess counts handlers that panicked after answering with
	// a success status: their messages were marked, since the platform got
	// the answer (see [Middleware]).
	PanicsAfterSuccess uint64
	// Forbidden counts requests refused with 403 by [WithSourceFilter].
	Forbidden uint64
	// ReplayTooLarge counts answers too large to keep for [WithReplay].
	ReplayTooLarge uint64
}

type counters struct {
	unauthenticated, undeduplicated, protocol, malformed atomic.Uint64
	panicsAfterSuccess, forbidden, replayTooLarge        atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Unauthenticated: c.unauthenticated.Load(),
		Undeduplicated:  c.undeduplicated.Load(),
		Protocol:        c.protocol.Load(),
		Malformed:       c.malformed.Load(),

		PanicsAfterSuccess: c.panicsAfterSuccess.Load(),
		Forbidden:          c.forbidden.Load(),
		ReplayTooLarge:     c.replayTooLarge.Load(),
	}
}

// Kinds of rate-limited warnings.
const (
	warnUnauthenticated = iota
	warnUndeduplicated
	warnReplayTooLarge
	warnEventRefused // an event of a batch refused alone
	numWarnings
)

// warnInterval is the least time between two warnings of one kind and one
// reason.
const warnInterval = time.Minute

// maxReasons bounds the reasons of one kind of warning remembered within
// warnInterval; warnings of further reasons are held back.
const maxReasons = 16

// limiter lets a warning of each reason through at most once per
// warnInterval, and counts the ones it held back. The reason is the text of
// the warning's error with its digits left out (a timestamp or an offset in
// it), so that an unsigned delivery is logged even among a flood of wrong
// signatures, and each cause of a refusal is seen.
type limiter struct {
	mu         sync.Mutex
	next       map[string]int64 // by reason: UnixNano before which its warnings are held back
	suppressed uint64
}

// allow reports whether to log a warning of reason now, and how many
// warnings were held back since the last one logged.
func (l *limiter) allow(now time.Time, reason string) (bool, uint64) {
	t := now.UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := l.next[reason]; ok && t < n {
		l.suppressed++
		return false, 0
	}
	if l.next == nil {
		l.next = make(map[string]int64)
	}
	if len(l.next) >= maxReasons {
		for r, n := range l.next {
			if n <= t {
				delete(l.next, r)
			}
		}
		if len(l.next) >= maxReasons {
			l.suppressed++
			return false, 0
		}
	}
	l.next[reason] = t + warnInterval.Nanoseconds()
	held := l.suppressed
	l.suppressed = 0
	return true, held
}

// reasonOf returns the reason of a warning with attrs: the text of its
// error without digits, or "".
func reasonOf(attrs []slog.Attr) string {
	for _, a := range attrs {
		if a.Key != "error" {
			continue
		}
		return strings.Map(func(r rune) rune {
			if '0' <= r && r <= '9' {
				return -1
			}
			return r
		}, a.Value.String())
	}
	return ""
}

// warn logs msg at warn level unless a warning of the same kind and reason
// (see limiter) was logged less than warnInterval ago.
func (c *config) warn(ctx context.Context, kind int, msg string, attrs ...slog.Attr) {
	ok, held := c.warnings[kind].allow(c.now(), reasonOf(attrs))
	if !ok {
		return
	}
	if held > 0 {
		attrs = append(attrs, slog.Uint64("since_last_warning", held))
	}
	c.log(ctx, slog.LevelWarn, msg, attrs...)
}

// A Verdict is what the middleware decided about a request, as [KeyFrom]
// tells the handler. The verdicts of the answers the middleware gives itself
// are sent in the [HeaderVerdict] header.
type Verdict string

// Verdicts a handler can see.
const (
	// VerdictNew: the message is claimed and this request processes it. It is
	// marked processed if the handler answers 2xx, released otherwise.
	VerdictNew Verdict = "new"
	// VerdictDuplicate: the message was processed already; seen by the
	// handler of [WithDuplicate].
	VerdictDuplicate Verdict = "duplicate"
	// VerdictInFlight: another request is processing the message and did not
	// finish within the wait; seen by the handler of [WithInFlight].
	VerdictInFlight Verdict = "in_flight"
	// VerdictProtocol: a protocol request (URL verification, PING,
	// heartbeat), served without deduplication; the handler answers it.
	VerdictProtocol Verdict = "protocol"
	// VerdictUndeduplicated: the delivery has no usable message id and is
	// served without deduplication.
	VerdictUndeduplicated Verdict = "undeduplicated"
)

// delivery is what the middleware knows of one request. It is the request's
// context (wrapping the original one) and holds the buffered body, so that
// one allocation serves both.
type delivery struct {
	context.Context
	body    body
	key     dedupe.Key
	verdict Verdict
	result  string // the decision record's, for Outcome
	err     error  // behind a failed result

	tokenInBody bool // authenticated by a token in its body alone: never replayed to
}

type deliveryKey struct{}

// Value returns the delivery itself for deliveryKey, and asks the wrapped
// context otherwise.
func (d *delivery) Value(key any) any {
	if key == (deliveryKey{}) {
		return d
	}
	return d.Context.Value(key)
}

// KeyFrom returns the key of the message the request with context ctx
// carries, and what the middleware decided about it, so that the handler
// behind [New], [Middleware] or [Async] (or [WithDuplicate], [WithInFlight])
// need not parse the body again. Both are zero outside the middleware; the
// key is zero for a request without one (protocol, undeduplicated).
func KeyFrom(ctx context.Context) (dedupe.Key, Verdict) {
	if d, ok := ctx.Value(deliveryKey{}).(*delivery); ok {
		return d.key, d.verdict
	}
	return dedupe.Key{}, ""
}
