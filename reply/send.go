package reply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Message is one send of a reply, as the [SendFunc] gets it.
type Message struct {
	Key     dedupe.Key // the message the reply answers
	Slot    int        // the reply's number among the message's replies, from 0
	Token   string     // [Platform].Token(Key, Slot); "" for a platform without one
	Body    []byte     // what compose returned, kept in the record since; the SendFunc must not change it
	Attempt int        // 1 for the first send of this reply; more when one whose outcome was unknown (or [NotSent]) is sent again
}

// SendFunc sends m to the platform, with m.Token in the request where the
// platform takes one, and returns the platform's id of the sent message (""
// if it has none). An error marked with [NotSent] says the platform refused
// the message; any other error leaves the outcome unknown.
type SendFunc func(ctx context.Context, m Message) (id string, err error)

// Receipt is what [Sender.Send] did.
type Receipt struct {
	ID             string // the platform's id of the message, as recorded
	Token          string // the token the reply is sent with ("" for none)
	Attempts       int    // the sends of the reply so far, this call's included
	Sent           bool   // this call sent it; false when the record said it was sent already
	MaybeDuplicate bool   // AtLeastOnce sent it again after an unknown outcome
}

// Sender sends the replies of processed messages once each, keeping a record
// of each send in a [dedupe.Store]. It is safe for concurrent use; copies
// running in several processes over one store are safe too: one handles a
// reply at a time, the others get [dedupe.ErrInFlight].
type Sender struct {
	store dedupe.Store
	p     Platform
	o     options
}

// options are a Sender's settings.
type options struct {
	ttl, lease time.Duration
	policy     Policy
	check      func(ctx context.Context, m Message) (id string, found bool, err error)
	now        func() time.Time
	log        *slog.Logger
}

// Option configures a [Sender].
type Option func(*options)

// defaultLease is the lease of a reply's lock by default ([WithLease]).
const defaultLease = 15 * time.Second

// maxSend bounds one call of a SendFunc, whose context also ends when the
// reply's lock is lost.
const maxSend = time.Minute

// New returns a Sender that sends replies to platform p, keeping its records
// in store. The store is the caller's: the Sender does not close it.
func New(store dedupe.Store, p Platform, opts ...Option) *Sender {
	o := options{
		ttl:    dedupe.DefaultTTL,
		lease:  defaultLease,
		policy: p.Policy,
		now:    time.Now,
		log:    slog.New(slog.DiscardHandler),
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.policy < Native || o.policy > AtLeastOnce {
		o.policy = AtMostOnce
	}
	o.ttl = max(o.ttl, p.Window)
	return &Sender{store: store, p: p, o: o}
}

// WithTTL sets how long a reply's record is kept (d <= 0: [dedupe.DefaultTTL]),
// never less than the platform's Window. Past it, the reply is forgotten:
// a later Send with a compose sends it anew.
func WithTTL(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.ttl = d
		}
	}
}

// WithLease sets the lease of a reply's lock (d <= 0: 15 s). Send holds the
// lock while it handles a reply, and renews it every third of the lease
// until it returns (a heartbeat), so that no other copy takes the reply
// while it is composed or sent, however long that takes; a copy that died
// holding the lock blocks the reply only until its lease runs out
// ([dedupe.ErrInFlight] meanwhile). If no renewal reaches the store within
// the lease, or one finds the lock taken over, the lock is lost: a send
// under way has its context cancelled, and Send sends nothing more and
// returns an error matching [dedupe.ErrInFlight]. A send (one call of the
// [SendFunc]) is also bounded to a minute.
func WithLease(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.lease = d
		}
	}
}

// WithPolicy overrides the platform's policy: [AtLeastOnce] for a Telegram
// gateway that would rather send a reply twice than lose it. A value that is
// not a Policy means [AtMostOnce].
func WithPolicy(p Policy) Option {
	return func(o *options) { o.policy = p }
}

// WithCheck sets a read-back: asked before sending again a reply whose send's
// outcome is unknown (Slack: search the channel's history for the message's
// metadata). found: the reply is recorded as sent with id, not sent again;
// not found: it is sent again, under any policy; an error: Send returns it
// and the outcome stays unknown.
func WithCheck(check func(ctx context.Context, m Message) (id string, found bool, err error)) Option {
	return func(o *options) { o.check = check }
}

// WithClock sets the clock Send measures the platform's window with
// (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithLogger sets the logger (default: none) of unknown outcomes, of
// possibly lost and of possibly duplicated replies, each at Warn.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// Send sends reply number slot of the message key once:
//
//  1. It takes a short lock on (key, slot), a [dedupe.Store.Claim] of a lock
//     key released at the end and renewed while Send runs ([WithLease]): a
//     copy running elsewhere gets [dedupe.ErrInFlight].
//  2. It reads the reply's record. Sent: it returns its receipt without
//     sending. [NotSent]: it sends again. Unknown outcome: the [WithCheck]
//     function, then the [Policy], decide. No record: it calls compose (an
//     error is returned and nothing recorded; compose nil gives
//     [ErrNoReply]) and records the reply as intended, with its body,
//     before sending it.
//  3. Before each send the record holds "intended, attempt n, since t,
//     first sent at f, body"; after it "sent, id" or "not sent"; an
//     unknown outcome leaves "intended".
//
// The error of a failed send is returned wrapped; a resend the policy refused
// matches [ErrMaybeLost]. A body over 64 KiB less 1,066 bytes (the record's
// header and the platform's id) is refused before sending, with
// [dedupe.ErrTooLarge]. An unreadable record is an error matching
// [ErrBadRecord], and nothing is sent.
func (s *Sender) Send(ctx context.Context, key dedupe.Key, slot int,
	compose func(ctx context.Context) ([]byte, error), send SendFunc) (Receipt, error) {
	if err := s.checkArgs(key, slot, send); err != nil {
		return Receipt{}, err
	}
	h, err := s.lock(ctx, key, slot)
	if err != nil {
		return Receipt{}, err
	}
	defer h.release(ctx)
	rec, found, err := s.read(ctx, key, slot)
	switch {
	case err != nil:
		return Receipt{}, err
	case !found:
		if compose == nil {
			return Receipt{}, fmt.Errorf("reply: %s: %s slot %d: %w", s.p.Name, key, slot, ErrNoReply)
		}
		body, err := compose(ctx)
		if err != nil {
			return Receipt{}, fmt.Errorf("reply: %s: compose %s slot %d: %w", s.p.Name, key, slot, err)
		}
		if err := s.checkBody(key, slot, body); err != nil {
			return Receipt{}, err
		}
		rec = record{state: intended, body: body}
	case rec.state == sent:
		return Receipt{ID: rec.id, Token: s.token(key, slot), Attempts: rec.attempt}, nil
	case rec.state == intended && rec.attempt > 0:
		return s.resend(ctx, h, rec, send)
	}
	return s.attempt(ctx, h, rec, send, false)
}

// resend decides what to do with a reply whose last send's outcome is
// unknown: ask the check, then the policy.
func (s *Sender) resend(ctx context.Context, h *held, rec record, send SendFunc) (Receipt, error) {
	key, slot := h.key, h.slot
	log := s.o.log.With("platform", s.p.Name, "key", key.String(), "slot", slot, "attempt", rec.attempt)
	if s.o.check != nil {
		id, found, err := s.o.check(ctx, s.message(key, slot, rec, rec.attempt))
		switch {
		case err != nil:
			return Receipt{}, fmt.Errorf("reply: %s: check %s slot %d: %w", s.p.Name, key, slot, err)
		case found:
			rec.state, rec.id = sent, id
			if err := s.write(ctx, key, slot, rec); err != nil {
				return Receipt{}, err
			}
			log.Info("reply: check found a reply whose send's outcome was unknown", "id", id)
			return Receipt{ID: id, Token: s.token(key, slot), Attempts: rec.attempt}, nil
		}
		return s.attempt(ctx, h, rec, send, false)
	}
	since := time.UnixMilli(rec.at)
	if s.p.WindowFromFirstRequest && rec.first > 0 {
		since = time.UnixMilli(rec.first)
	}
	switch {
	case s.o.policy == Native && s.inWindow(since):
		return s.attempt(ctx, h, rec, send, false)
	case s.o.policy == AtLeastOnce:
		log.Warn("reply: sent again after an unknown outcome: possibly duplicated", "policy", s.o.policy)
		return s.attempt(ctx, h, rec, send, true)
	}
	log.Warn("reply: not sent again after an unknown outcome: possibly lost", "policy", s.o.policy, "since", since)
	return Receipt{Token: s.token(key, slot), Attempts: rec.attempt},
		fmt.Errorf("reply: %s: %s slot %d, %s, after %d sends: %w", s.p.Name, key, slot, s.o.policy, rec.attempt, ErrMaybeLost)
}

// inWindow reports whether a send again, begun now, reaches the platform
// within its window of a token first sent at since, with a margin for the
// request's way there: the bound on a send, or a tenth of the window if that
// is less.
func (s *Sender) inWindow(since time.Time) bool {
	margin := min(maxSend, s.p.Window/10)
	return s.p.Window > 0 && s.o.now().Add(margin).Before(since.Add(s.p.Window))
}

// attempt sends rec once more: it renews the lock, records the reply
// intended with the next attempt number, calls send within what is left of
// the lock's lease, and records the outcome.
func (s *Sender) attempt(ctx context.Context, h *held, rec record, send SendFunc, dup bool) (Receipt, error) {
	key, slot := h.key, h.slot
	if err := h.renew(ctx); err != nil {
		return Receipt{}, err
	}
	if rec.state != intended || rec.attempt == 0 { // a new series of sends: the platform holds no token yet
		rec.at = s.o.now().UnixMilli()
	}
	if rec.first == 0 { // the token's first request, whatever its answer
		rec.first = rec.at
	}
	rec.state, rec.attempt = intended, rec.attempt+1
	if err := s.write(ctx, key, slot, rec); err != nil {
		return Receipt{}, err
	}
	r := Receipt{Token: s.token(key, slot), Attempts: rec.attempt, MaybeDuplicate: dup}
	sctx, cancel := context.WithTimeout(h.ctx, maxSend)
	id, err := send(sctx, s.message(key, slot, rec, rec.attempt))
	cancel()
	// The outcome is recorded even if ctx ended meanwhile.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.lease)
	defer wcancel()
	switch {
	case err == nil:
		rec.state, rec.id = sent, id
		r.ID, r.Sent = id, true
		if werr := s.write(wctx, key, slot, rec); werr != nil {
			return r, fmt.Errorf("reply: %s: %s slot %d sent but not recorded: %w", s.p.Name, key, slot, werr)
		}
		return r, nil
	case IsNotSent(err):
		rec.state = notSent
		if werr := s.write(wctx, key, slot, rec); werr != nil {
			err = errors.Join(err, werr)
		}
		return r, fmt.Errorf("reply: %s: send %s slot %d: refused: %w", s.p.Name, key, slot, err)
	}
	s.o.log.Warn("reply: send's outcome unknown", "platform", s.p.Name, "key", key.String(), "slot", slot,
		"attempt", rec.attempt, "err", err)
	return r, fmt.Errorf("reply: %s: send %s slot %d: outcome unknown: %w", s.p.Name, key, slot, err)
}

// Flush sends every recorded reply of key not yet sent: slots 0, 1, ...
// until one has no record (slots are numbered densely from 0), and returns a
// receipt per slot, in order, those sent already included. It is the outbox
// path: a message whose transaction committed its replies' records
// ([IntendTx]) and whose process died before sending them is answered
// [dedupe.ErrDuplicate] on redelivery; the caller then calls Flush. A reply
// the policy will not send again ([ErrMaybeLost]) is skipped, its error
// joined to the one returned; any other error stops Flush, so that replies
// go out in order.
func (s *Sender) Flush(ctx context.Context, key dedupe.Key, send SendFunc) ([]Receipt, error) {
	var rs []Receipt
	var lost []error
	for slot := 0; ; slot++ {
		r, err := s.Send(ctx, key, slot, nil, send)
		switch {
		case errors.Is(err, ErrNoReply):
			return rs, errors.Join(lost...)
		case errors.Is(err, ErrMaybeLost):
			lost = append(lost, err)
		case err != nil:
			return rs, errors.Join(append(lost, err)...)
		}
		rs = append(rs, r)
	}
}

// message is the Message of send number attempt of rec.
func (s *Sender) message(key dedupe.Key, slot int, rec record, attempt int) Message {
	return Message{Key: key, Slot: slot, Token: s.token(key, slot), Body: rec.body, Attempt: attempt}
}

// token is the platform's token of reply slot of key, "" for none.
func (s *Sender) token(key dedupe.Key, slot int) string {
	if s.p.Token == nil {
		return ""
	}
	return s.p.Token(key, slot)
}
