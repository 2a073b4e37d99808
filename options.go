package dedupe

import (
	"context"
	"log/slog"
	"time"
)

// settings are what options set.
type settings struct {
	ttl          time.Duration // 0: the store's default
	lease        time.Duration
	renew        time.Duration // < 0: no renewal; 0: a third of the lease
	wait         time.Duration // 0: no waiting
	local        Store         // the fallback store, or nil
	retry        time.Duration // how long the fallback serves alone after failures
	queue        int           // bound of the backlog
	now          func() time.Time
	logger       *slog.Logger
	traceID      func(context.Context) string
	storeTimeout time.Duration // <= 0: none
	fbConfig     int           // bumped by each fallback option, so With knows to rebuild
	concurrency  int           // fns of a DoEach run at once; <= 1: one after another

	pay payloadSettings // WithPayloadCheck, WithPayload (payload.go)
}

// defaultDeduperLease is the lease of a Deduper's claims unless [WithLease]
// sets another; WithLease's doc says why it is short.
const defaultDeduperLease = 30 * time.Second

// Defaults of the options.
const (
	defaultFallbackRetry = 5 * time.Second
	defaultBacklog       = 10000
)

func defaultSettings() settings {
	return settings{
		lease:   defaultDeduperLease,
		retry:   defaultFallbackRetry,
		queue:   defaultBacklog,
		now:     time.Now,
		logger:  slog.New(slog.DiscardHandler),
		traceID: TraceID,
	}
}

// An Option configures a [Deduper], in [New] or [Deduper.With].
//
// The duration options follow one rule, the stores' own: zero keeps the
// setting as it is (the default, or what an earlier option set, such as a
// drop-in's wait), so that a duration read from a flag or a config file that
// defaults to 0 changes nothing; a negative duration turns off what can be
// turned off (the wait, renewal, the store timeout) and otherwise keeps the
// setting too.
type Option func(*settings)

// WithTTL sets how long a processed message stays marked (default: the
// store's default TTL; zero or less keeps the setting).
func WithTTL(ttl time.Duration) Option {
	return func(s *settings) {
		if ttl > 0 {
			s.ttl = ttl
		}
	}
}

// WithLease sets how long a claim holds a message while it is processed:
// by default 30 s, renewed every third of it while fn runs ([WithRenewal],
// on by default); zero or less keeps the setting. So the message of a
// process that died (killed, out of memory, its machine gone) can run again
// about 30 s later, while a handler that runs for minutes or hours keeps its
// claim as long as a renewal reaches the store within the lease. If none
// does (the store unreachable for about a lease), Do cancels fn's context
// with a cause wrapping [ErrNotOwner] (see [Deduper.Do]). A longer lease
// rides out a longer store outage; a shorter one brings a dead process's
// message back sooner. A store's own default ([DefaultLease]) is longer: it
// serves a [Store.Claim] with no lease, which nothing renews.
func WithLease(lease time.Duration) Option {
	return func(s *settings) {
		if lease > 0 {
			s.lease = lease
		}
	}
}

// WithRenewal sets how often Do extends a claim's lease while fn runs: by
// default a third of the lease; zero keeps the setting, and a negative
// interval turns renewal off, so fn's context ends with the lease. An
// interval over half the lease could let it lapse, so it is clamped to a
// third.
func WithRenewal(every time.Duration) Option {
	return func(s *settings) { setDuration(&s.renew, every, -1) }
}

// WithWait makes Do wait up to max when another caller holds the message's
// claim, asking the store again with a backoff from 5 ms to 250 ms, until the
// owner marks it (Do returns [ErrDuplicate]), releases it or its lease runs out
// (Do runs fn, after the owner, never beside it), or max or ctx ends (Do returns
// [ErrInFlight]). By default Do does not wait; zero keeps the setting (so
// WithWait(0) does not switch off a drop-in's wait), and a negative max turns
// waiting off. An HTTP gateway uses it to answer a copy with the first copy's
// outcome.
func WithWait(max time.Duration) Option {
	return func(s *settings) { setDuration(&s.wait, max, 0) }
}

// WithStoreTimeout bounds each store call Do makes (the claim with its
// retry, the mark, the release, each renewal) to d, whatever the caller's
// context allows (default: no bound of its own; zero keeps the setting, a
// negative d removes the bound). Drivers without a read timeout (pgx)
// otherwise wait on a stalled server as long as the context lets them; a
// call cut short is handled as any failed call (see [Deduper.Do]).
func WithStoreTimeout(d time.Duration) Option {
	return func(s *settings) { setDuration(&s.storeTimeout, d, 0) }
}

// setDuration applies the duration options' rule to the setting *p: a
// positive d sets it, zero keeps it, and a negative d sets it to off.
func setDuration(p *time.Duration, d, off time.Duration) {
	switch {
	case d > 0:
		*p = d
	case d < 0:
		*p = off
	}
}

// WithLogger sets the logger of verdicts (debug) and store errors (warn).
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) {
		if l != nil {
			s.logger = l
		}
	}
}

// WithTraceID sets how a log record's trace id is found in a context (default
// [TraceID]).
func WithTraceID(f func(context.Context) string) Option {
	return func(s *settings) {
		if f != nil {
			s.traceID = f
		}
	}
}

// WithClock sets the clock of the fallback and the backlog (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(s *settings) {
		if now != nil {
			s.now = now
			s.fbConfig++
		}
	}
}

// WithFallback makes the Deduper keep working on local, typically a
// [MemoryStore], when the primary store fails. Without it the Deduper fails
// closed: Do returns the store's error and the platform retries.
//
// Claims are then taken on local first and on the primary second, so two copies
// in this process never run at once whichever store answered. A claim the
// primary fails to take (other than an invalid key, a full or closed store or
// the caller's context) is served by local alone ([Stats].Fallbacks). After three
// failures in a row local serves alone for 5 s (on the [WithClock] clock); then one
// call probes the primary before the others return to it. Marks go to local
// too; one the primary did not take is queued ([WithBacklog]) and written once
// it answers, so other instances recognise the message after the outage. One
// the primary refuses for good (a full or closed store) is not queued: Do
// returns the error, as it does without a fallback.
func WithFallback(local Store) Option {
	return func(s *settings) {
		s.local = local
		s.fbConfig++
	}
}

// WithBacklog bounds the queue of work the primary store failed to take, done
// later by one goroutine: marks of processed messages, and releases of claims
// (after a failure of fn, or of a Claim call) (default 10000; zero or less
// keeps it). Work beyond it is dropped and counted in [Stats].Dropped. The
// backlog belongs to the Deduper made by [New]; those made by [Deduper.With]
// share it, with its bound.
func WithBacklog(n int) Option {
	return func(s *settings) {
		if n > 0 {
			s.queue = n
		}
	}
}

// WithConcurrency sets how many fns of a batch [Deduper.DoEach] runs at once
// (default 1: one after another, in the batch's order; zero or less keeps
// the setting). Use [Deduper.With] to give one batch its own.
func WithConcurrency(n int) Option {
	return func(s *settings) {
		if n > 0 {
			s.concurrency = n
		}
	}
}
