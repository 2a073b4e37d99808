package dedupe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Deduper runs each message's processing once: it claims the key before
// running the caller's function and marks it only after the function succeeded,
// so a failure is left to the platform's retry and two concurrent copies never
// both run. It is safe for concurrent use. Work its store failed to take at
// first ([WithBacklog]) is done by one goroutine, which ends with that work.
type Deduper struct {
	settings
	st     Store // what Do works on: the primary store, or the fallback over it
	shared *shared
}

// shared is what a Deduper and those made from it by [Deduper.With] share.
type shared struct {
	store    Store // the primary store
	counters counters
	backlog  *backlog
}

// New returns a Deduper over store, which it does not close; a nil store gets
// a new [MemoryStore]. If store is a [MinLeaser] (the Redis store on a
// cluster is) and the lease is shorter, New logs a warning.
func New(store Store, opts ...Option) *Deduper {
	if store == nil {
		store = NewMemoryStore(MemoryConfig{})
	}
	d := &Deduper{settings: defaultSettings(), shared: &shared{store: store}}
	d.apply(opts)
	d.shared.backlog = newBacklog(d.settings, &d.shared.counters)
	d.st = d.workStore()
	d.checkLease()
	return d
}

// checkLease warns when the lease is shorter than the store needs to ride
// out a failover ([MinLeaser], such as a Redis Cluster's store).
func (d *Deduper) checkLease() {
	if m, ok := d.shared.store.(MinLeaser); ok && d.lease < m.MinLease() {
		d.logger.Warn("dedupe: the lease is shorter than the store's failover: a claim can run out during one, and another instance run the message",
			slog.Duration("lease", d.lease), slog.Duration("store_min_lease", m.MinLease()))
	}
}

// With returns a Deduper sharing d's store, counters and backlog, with opts
// applied over d's options, so that one Deduper serves several platforms each
// with its own TTL or wait. A fallback option gives it a fallback of its own.
func (d *Deduper) With(opts ...Option) *Deduper {
	n := &Deduper{settings: d.settings, st: d.st, shared: d.shared}
	n.apply(opts)
	if n.fbConfig != d.fbConfig {
		n.st = n.workStore()
	}
	return n
}

// apply applies opts and settles the renewal interval.
func (d *Deduper) apply(opts []Option) {
	for _, o := range opts {
		o(&d.settings)
	}
	if d.renew == 0 || d.renew > d.lease/2 {
		d.renew = d.lease / 3
	}
}

// workStore returns the store Do works on: the fallback over the primary
// ([WithFallback]), or the primary.
func (d *Deduper) workStore() Store {
	if fb := d.newFallback(); fb != nil {
		return fb
	}
	return d.shared.store
}

// Store returns the primary store.
func (d *Deduper) Store() Store { return d.shared.store }

// Exists reports whether key is marked as the Deduper sees it: its mark is
// queued in the backlog, or its store holds it ([WithFallback]'s local store
// answers while the primary fails). A caller that must decide before [Do]
// whether a message was processed (an edge that queues messages, as
// dedupehttp's durable acceptance does) asks here rather than the primary.
func (d *Deduper) Exists(ctx context.Context, key Key) (bool, error) {
	if err := key.Validate(); err != nil {
		return false, err
	}
	if _, ok := d.shared.backlog.markQueued(key); ok {
		return true, nil
	}
	var ok bool
	err := d.timed(ctx, phaseClaim, func(ctx context.Context) (err error) {
		ok, err = d.st.Exists(ctx, key)
		return err
	})
	if err != nil {
		d.storeError(ctx, key, d.st, phaseClaim, err)
	}
	return ok, err
}

// Close stops the background work shared with [Deduper.With] and drops what
// is queued ([Stats].Dropped); it does not close the stores. It is idempotent.
func (d *Deduper) Close() error {
	d.shared.backlog.close()
	return nil
}

// Flush waits until the work queued for the primary store ([WithBacklog]) is
// done, or ctx is; call it before Close.
func (d *Deduper) Flush(ctx context.Context) error {
	return d.shared.backlog.flush(ctx)
}

// cleanupTimeout bounds the Mark (and the wait for its retries) or Release
// that Do makes after fn returned. They run even if the caller's context was
// cancelled meanwhile: a processed message must be marked, and a failed one
// released.
const cleanupTimeout = 10 * time.Second

// abandonTimeout bounds the Release of a claim whose Claim call failed.
const abandonTimeout = time.Second

// Do runs fn once for the message key identifies:
//   - If the key is marked, Do returns [ErrDuplicate] without running fn
//     (with [WithPayloadCheck], an error wrapping [ErrPayloadMismatch] too
//     if the copy's payload differs from the one the mark keeps).
//   - If another caller holds its claim, Do returns [ErrInFlight] without
//     running fn, or first waits for that caller (see [WithWait]).
//   - Otherwise Do claims it and runs fn. If fn returns nil, Do marks the key
//     and returns nil. If fn returns an error or panics, Do releases the
//     claim, so the platform's retry is processed, and returns the error
//     unchanged (or lets the panic go on).
//
// Do renews the lease while fn runs ([WithRenewal]). If the lease ends (a
// twentieth early, at most a second, for a late timer) before
// a renewal could extend it (the store unreachable, or the claim taken over),
// Do cancels fn's context with a cause wrapping [ErrNotOwner], since another
// copy may now be claimed: a handler that honours its context never runs
// beside another instance's. One that ignores it still can; Do then marks the
// message if fn succeeds, and returns fn's error wrapped with the cause if not.
//
// A store error while claiming is returned without running fn ([WithFallback]
// changes that); if the store may have taken the claim all the same (a lost
// reply, a deadline passed mid-call), Do asks again with the same token while
// ctx allows, or else releases it by its token. It releases it too if the
// second ask finds another claim holding the key, since the first may still
// reach the store once that claim is gone. A mark or a release the store
// does not take is queued in the backlog and retried until it lands or is no
// longer needed (the TTL or the lease ran out); copies of a message whose mark
// is queued are answered with ErrDuplicate. Do waits up to 10 s for such a mark
// and then returns the store's error; the mark stays queued ([Deduper.Flush]).
func (d *Deduper) Do(ctx context.Context, key Key, fn func(context.Context) error) error {
	_, err := d.do(ctx, key, func(ctx context.Context) ([]byte, error) { return nil, fn(ctx) }, false)
	return err
}

// DoResult is [Deduper.Do] for a function with a result, which is kept with
// the key's mark ([Store.MarkResult]) and given to every copy, with
// [ErrDuplicate]: to copies that arrive later and to copies that waited for
// the first run ([WithWait]). So a platform that shows a handler's answer,
// or a client that retries a request, gets the first run's answer again
// without running fn twice.
//
// A copy's result is nil if the first run's result was empty, longer than
// [MaxResultSize] (the key is marked without it and a warning logged; fn is
// not run again), gone from the store before its mark, or unreadable (a store
// error, logged). When fn runs, DoResult returns what fn returned, with Do's
// error.
func (d *Deduper) DoResult(ctx context.Context, key Key, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	return d.do(ctx, key, fn, true)
}

// do is Do and DoResult: it runs fn once for key, and answers a copy with
// ErrDuplicate and, if withResult, the result kept with the key's mark.
func (d *Deduper) do(ctx context.Context, key Key, fn func(context.Context) ([]byte, error), withResult bool) ([]byte, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	fps, err := d.callPayloads(1)
	if err != nil {
		return nil, err
	}
	fp := fpAt(fps, 0)
	start := time.Now()
	cs := &d.shared.counters
	if res, ok := d.shared.backlog.markQueued(key); ok { // processed here; its mark is queued
		return d.answerCopy(ctx, key, fp, res, backlogPhase, start)
	}
	c := NewClaim(key)
	claimed := start
	status, layer, err := d.claim(ctx, c)
	if err == nil && status == InFlight && d.wait > 0 {
		c, status, layer, claimed, err = d.waitForOwner(ctx, c)
	}
	if err != nil {
		d.decided(ctx, key, resultStoreError, layer, start, err)
		return nil, err
	}
	switch status {
	case Duplicate:
		var res []byte
		if withResult || fp != nil {
			res = d.storedResult(ctx, key)
		}
		return d.answerCopy(ctx, key, fp, res, layer, start)
	case InFlight:
		cs.inFlight.Add(1)
		d.decided(ctx, key, resultInFlight, layer, start, nil)
		return nil, ErrInFlight
	case Claimed:
		if res, ok := d.shared.backlog.markQueued(key); ok {
			// Processed here while this copy claimed (the claim can take a
			// while: a wait, an outage) and its mark is queued: the store
			// gave the claim only because the first run's lease ran out.
			d.release(ctx, c)
			return d.answerCopy(ctx, key, fp, res, backlogPhase, start)
		}
	default:
		cs.storeErrors.Add(1)
		err := fmt.Errorf("dedupe: %s store returned claim status %d", d.st.Backend(), status)
		d.decided(ctx, key, resultStoreError, layer, start, err)
		return nil, err
	}
	return d.run(ctx, c, fp, layer, start, claimed, fn)
}

// storedResult returns the result kept with key's mark on the Deduper's
// store, or nil.
func (d *Deduper) storedResult(ctx context.Context, key Key) []byte {
	var res []byte
	err := d.timed(ctx, phaseClaim, func(ctx context.Context) (err error) {
		res, _, err = d.st.Result(ctx, key)
		return err
	})
	if err != nil {
		d.storeError(ctx, key, d.st, phaseClaim, err)
		return nil
	}
	return res
}

// claim claims c on the Deduper's store, settling an ambiguous failure.
func (d *Deduper) claim(ctx context.Context, c Claim) (status Status, layer string, err error) {
	err = d.timed(ctx, phaseClaim, func(ctx context.Context) error {
		status, layer, err = claimSettled(ctx, d.st, c, d.lease, d.shared.backlog)
		return err
	})
	if err != nil {
		d.storeError(ctx, c.Key, d.st, phaseClaim, err)
	}
	return status, layer, err
}

// claimSettled claims c on st. If the call fails in a way that leaves it
// unknown whether st took the claim, it asks once more with the same token
// while ctx lives, and otherwise releases the claim by its token, queueing the
// release in b if that fails too: a failed call strands no claim. The layer is
// the part of st that decided, if st says (see decider).
//
// A retry answered InFlight settles nothing: the failed call may still be on
// its way (its connection failed, not its request), and take the key for c
// once the other claim is gone, after Do has answered ErrInFlight. So c is
// released then too, which fences its token on the stores that can be
// reached late (Redis, PostgreSQL): the late call takes nothing. The token
// is spent: a caller that claims the key again does so with a new one.
func claimSettled(ctx context.Context, st Store, c Claim, lease time.Duration, b *backlog) (Status, string, error) {
	status, layer, err := claimBy(ctx, st, c, lease)
	if err == nil || !ambiguous(err) {
		return status, layer, err
	}
	b.cs.ambiguous.Add(1)
	if ctx.Err() == nil && !isContextErr(err) {
		status, layer, err2 := claimBy(ctx, st, c, lease)
		if err2 == nil {
			if status == InFlight {
				abandon(ctx, st, c, lease, b)
			}
			return status, layer, nil
		}
	}
	abandon(ctx, st, c, lease, b)
	return 0, layer, err
}

// abandon releases c, whose Claim may have taken the key or may yet, within
// abandonTimeout, and queues the release in b if st does not take it.
func abandon(ctx context.Context, st Store, c Claim, lease time.Duration, b *backlog) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	rerr := st.Release(rctx, c)
	cancel()
	if rerr != nil && !errors.Is(rerr, ErrNotOwner) && ambiguous(rerr) {
		b.cs.storeErrors.Add(1)
		b.queueRelease(st, c, lease)
	}
}

// claimBy is st.Claim, and names the part of st that decided if st says.
func claimBy(ctx context.Context, st Store, c Claim, lease time.Duration) (Status, string, error) {
	if dc, ok := st.(decider); ok {
		return dc.claimBy(ctx, c, lease)
	}
	status, err := st.Claim(ctx, c, lease)
	return status, "", err
}

// waitForOwner asks for c's key again, with a backoff, while another caller
// holds it, for at most the Deduper's wait. Each ask has a token of its own,
// since an ask answered InFlight may have spent its token (see claimSettled).
// It returns the claim it asked for last, and when, from which a lease it
// gets runs.
func (d *Deduper) waitForOwner(ctx context.Context, c Claim) (Claim, Status, string, time.Time, error) {
	cs := &d.shared.counters
	cs.waits.Add(1)
	wctx, cancel := context.WithTimeout(ctx, d.wait)
	defer cancel()
	timer := time.NewTimer(minWaitBackoff)
	defer timer.Stop()
	for backoff := minWaitBackoff; ; backoff = min(2*backoff, maxWaitBackoff) {
		select {
		case <-wctx.Done():
			cs.waitsTimedOut.Add(1)
			return c, InFlight, "", time.Time{}, nil
		case <-timer.C:
		}
		asked := time.Now()
		c = NewClaim(c.Key)
		status, layer, err := d.claim(wctx, c)
		switch {
		case err != nil && wctx.Err() != nil && ctx.Err() == nil:
			cs.waitsTimedOut.Add(1) // the wait ended during the call
			return c, InFlight, "", time.Time{}, nil
		case err != nil:
			return c, status, layer, asked, err
		case status == Duplicate:
			cs.waitsDuplicate.Add(1)
			return c, status, layer, asked, nil
		case status == Claimed:
			cs.waitsClaimed.Add(1)
			return c, status, layer, asked, nil
		}
		timer.Reset(min(2*backoff, maxWaitBackoff))
	}
}

// Bounds of the backoff between the claims of a wait.
const (
	minWaitBackoff = 5 * time.Millisecond
	maxWaitBackoff = 250 * time.Millisecond
)

// run runs fn under claim c, taken at claimed by a Do that started at
// start, then marks c's key, with fp's fingerprint if not nil, or releases
// c.
func (d *Deduper) run(ctx context.Context, c Claim, fp *fingerprint, layer string, start, claimed time.Time, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	cs := &d.shared.counters
	fctx, h := d.hold(ctx, c, claimed)
	done := false
	defer func() {
		if !done { // fn panicked or called runtime.Goexit
			h.stop()
			cs.failed.Add(1)
			d.release(ctx, c)
			d.decided(ctx, c.Key, resultFailed, layer, start, errFnPanicked)
		}
	}()
	res, ferr := fn(fctx)
	done = true
	lost := h.stop()

	if ferr != nil {
		cs.failed.Add(1)
		d.release(ctx, c)
		if lost != nil {
			err := fmt.Errorf("dedupe: %s abandoned: %w: %w", c.Key, lost, ferr)
			d.decided(ctx, c.Key, resultAbandoned, layer, start, err)
			return res, err
		}
		d.decided(ctx, c.Key, resultFailed, layer, start, ferr)
		return res, ferr
	}
	if err := d.markProcessed(ctx, c.Key, d.framed(ctx, c.Key, fp, res)); err != nil {
		d.decided(ctx, c.Key, resultStoreError, layer, start, err)
		return res, err
	}
	cs.processed.Add(1)
	if lost != nil {
		d.log(ctx, slog.LevelWarn, "dedupe: processed after its lease ran out", c.Key, phaseMark, lost, layerAttr(layer)...)
	}
	d.decided(ctx, c.Key, resultProcessed, layer, start, nil)
	return res, nil
}

// keptResult returns the part of fn's result res that the mark keeps: res,
// or nil if it is empty or longer than MaxResultSize.
func (d *Deduper) keptResult(ctx context.Context, key Key, res []byte) []byte {
	if len(res) > MaxResultSize {
		d.log(ctx, slog.LevelWarn, "dedupe: result not kept: longer than MaxResultSize", key, phaseMark,
			fmt.Errorf("%w: %d bytes, over %d", ErrTooLarge, len(res), MaxResultSize))
		return nil
	}
	if len(res) == 0 {
		return nil
	}
	return res
}

// markProcessed marks key after fn succeeded. A mark the store does not take
// is queued in the backlog, which retries it while copies are answered as
// duplicates; Do waits for it up to cleanupTimeout.
func (d *Deduper) markProcessed(ctx context.Context, key Key, res []byte) error {
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := d.timed(mctx, phaseMark, func(ctx context.Context) error { return markWith(ctx, d.st, key, res, d.ttl) })
	if err == nil {
		return nil
	}
	d.storeError(ctx, key, d.st, phaseMark, err)
	if ambiguous(err) {
		j := d.shared.backlog.queueMark(d.st, key, res, d.ttl)
		select {
		case <-j.done:
		case <-mctx.Done():
		}
		if !j.leave(&d.shared.counters) && j.err == nil {
			return nil // a retry wrote it
		}
	}
	return fmt.Errorf("dedupe: %s processed but not marked: %w", key, err)
}

// markWith marks key on st, keeping res with the mark if there is one.
func markWith(ctx context.Context, st Store, key Key, res []byte, ttl time.Duration) error {
	if len(res) > 0 {
		return st.MarkResult(ctx, key, res, ttl)
	}
	return st.Mark(ctx, key, ttl)
}

// release drops claim c after fn failed. A release the store does not take
// is queued in the backlog until the claim's lease would have run out.
func (d *Deduper) release(ctx context.Context, c Claim) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := d.timed(rctx, phaseRelease, func(ctx context.Context) error { return d.st.Release(ctx, c) })
	switch {
	case err == nil:
	case errors.Is(err, ErrNotOwner):
		d.shared.counters.leasesLost.Add(1)
		d.log(ctx, slog.LevelWarn, "dedupe: claim lost before release", c.Key, phaseRelease, err)
	default:
		d.storeError(ctx, c.Key, d.st, phaseRelease, err)
		if ambiguous(err) {
			d.shared.backlog.queueRelease(d.st, c, d.lease)
		}
	}
}

// timed runs the store call f, within the Deduper's store timeout if it has
// one ([WithStoreTimeout]), and records its duration.
func (d *Deduper) timed(ctx context.Context, phase int, f func(context.Context) error) error {
	if d.storeTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.storeTimeout)
		defer cancel()
	}
	start := time.Now()
	err := f(ctx)
	d.shared.counters.latency[phase].Observe(latencyBounds[:], time.Since(start))
	return err
}

func (d *Deduper) storeError(ctx context.Context, key Key, st Store, phase int, err error) {
	d.shared.counters.storeErrors.Add(1)
	d.log(ctx, slog.LevelWarn, "dedupe: store error", key, phase, err, slog.String("store", st.Backend()))
}

// layerAttr returns the log attribute naming the layer that decided, if any.
func layerAttr(layer string) []slog.Attr {
	if layer == "" {
		return nil
	}
	return []slog.Attr{slog.String("layer", layer)}
}

// decisionMsg is the message of the one record each decision of Do logs;
// package dedupelog recognises it.
const decisionMsg = "dedupe: decision"

// Results of a decision, the "result" of its record.
const (
	resultProcessed  = "processed"   // fn succeeded and the key is marked
	resultDuplicate  = "duplicate"   // the key was marked: fn did not run
	resultInFlight   = "in_flight"   // another caller held the claim: fn did not run
	resultFailed     = "failed"      // fn returned an error or panicked: the claim is released
	resultStoreError = "store_error" // the store failed the claim, or the mark after fn succeeded
	resultAbandoned  = "abandoned"   // fn failed after its lease was lost
)

// backlogPhase is the dedup_phase of a copy answered because its mark is
// queued in the backlog.
const backlogPhase = "backlog"

// decided logs the record of one decision of Do, at debug level: trace_id,
// platform (the key's channel), message_id, dedup_phase (the layer that
// decided, "fallback", "backlog", or else the primary store's backend),
// processing_time (since Do started), result and, for a decision that
// ended in an error (failed, abandoned, store_error), error.
// docs/observability.md lists the fields that can hold user data.
func (d *Deduper) decided(ctx context.Context, key Key, result, layer string, start time.Time, err error) {
	if !d.logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	if layer == "" {
		layer = d.shared.store.Backend()
	}
	attrs := [7]slog.Attr{
		slog.String("trace_id", d.traceID(ctx)),
		slog.String("platform", key.Channel),
		slog.String("message_id", key.MessageID),
		slog.String("dedup_phase", layer),
		slog.Duration("processing_time", time.Since(start)),
		slog.String("result", result),
	}
	n := 6
	if err != nil {
		attrs[n] = slog.Any("error", err)
		n++
	}
	d.logger.LogAttrs(ctx, slog.LevelDebug, decisionMsg, attrs[:n]...)
}

// errFnPanicked is the error of the decision record of a fn that panicked
// or called runtime.Goexit: the panic goes on to Do's caller.
var errFnPanicked = errors.New("dedupe: fn panicked or called runtime.Goexit")

func (d *Deduper) log(ctx context.Context, level slog.Level, msg string, key Key, phase int, err error, extra ...slog.Attr) {
	if !d.logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 5+len(extra))
	attrs = append(attrs,
		slog.String("key", key.String()),
		slog.String("backend", d.shared.store.Backend()),
		slog.String("phase", phaseNames[phase]))
	if id := d.traceID(ctx); id != "" {
		attrs = append(attrs, slog.String("trace_id", id))
	}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	attrs = append(attrs, extra...)
	d.logger.LogAttrs(ctx, level, msg, attrs...)
}
