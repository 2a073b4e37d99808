package dedupe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// DoEach is [Deduper.Do] for a batch of messages, such as the events of one
// webhook delivery (LINE's events[], Meta's entry[]), the updates of one
// getUpdates call or the messages a queue consumer took at once. It runs
// fn(ctx, i) once for each message keys[i] that no run processed or holds,
// and returns one error per key: errs[i] is what Do would have returned for
// it, nil when fn ran and succeeded and the key is marked, [ErrDuplicate]
// (wrapped with [ErrPayloadMismatch] for a copy whose payload differs,
// [WithPayloadCheck]), [ErrInFlight], fn's error, a store error or the
// key's [ErrInvalidKey].
//
// The store is asked for the batch at once: one [BatchStore.ClaimEach] claims
// every new key, and the marks of the keys processed (and the releases of
// those whose fn failed) go out in [BatchStore.MarkEach] and
// [BatchStore.ReleaseEach] round trips, gathering the keys whose fn returned
// meanwhile: a key's mark leaves once its batch's fns have all returned, or
// 1 ms after its fn returned, or when the round trip in flight ends, so that
// it is marked about as soon as Do would mark it. A
// store that is not a BatchStore is asked once per key, concurrently. The
// leases of the claimed keys are renewed together ([BatchStore.ExtendEach])
// until each key's fn has returned.
//
// The fns run one after another in the order of keys, or up to n at once
// with [WithConcurrency](n). A key that keys holds twice runs once, at its
// first place; its other places get its outcome, ErrDuplicate where it was
// processed. An invalid key is refused alone. The keys other callers hold
// are waited for ([WithWait]) once the batch's own keys ran, so that two
// batches holding parts of each other never wait for each other; those
// claimed then run last. Everything Do promises holds for each key: the
// wait for a copy in flight, the backlog and
// the fallback, fencing of an ambiguous claim, the cancellation of fn's
// context when its lease is lost (each key's on its own). A fn not started
// when ctx ends is not run: its claim is released and its error is ctx's.
// If fn panics, the keys whose fn had not started are released and not run,
// and DoEach panics again once the batch is settled.
func (d *Deduper) DoEach(ctx context.Context, keys []Key, fn func(ctx context.Context, i int) error) []error {
	_, errs := d.doEach(ctx, keys, func(ctx context.Context, i int) ([]byte, error) { return nil, fn(ctx, i) }, false)
	return errs
}

// DoEachResult is [Deduper.DoEach] for a function with a result, kept with
// each key's mark as [Deduper.DoResult] keeps it: results[i] is what fn
// returned for keys[i] when it ran, and the first run's result for a copy
// (errs[i] is [ErrDuplicate]).
func (d *Deduper) DoEachResult(ctx context.Context, keys []Key, fn func(ctx context.Context, i int) ([]byte, error)) (results [][]byte, errs []error) {
	return d.doEach(ctx, keys, fn, true)
}

// eachRun is one call of DoEach: its keys, and each one's claim and outcome,
// by the key's index.
type eachRun struct {
	d          *Deduper
	ctx        context.Context
	st         BatchStore // the batch calls of d.st
	keys       []Key
	fn         func(context.Context, int) ([]byte, error)
	withResult bool
	start      time.Time

	first   []int       // the index of the first place of keys[i]'s key; -1 if invalid
	claims  []Claim     // the claim asked last for each key
	claimed []time.Time // when it was asked: the lease runs from then
	lost    []error     // why a key's lease was lost while its fn ran, or nil
	pay     eachPayload // the batch's payloads (WithPayload)
	results [][]byte
	errs    []error

	mu      sync.Mutex
	panic   any  // the first panic of a fn
	stopped bool // a fn panicked or called runtime.Goexit: start no more
}

func (d *Deduper) doEach(ctx context.Context, keys []Key, fn func(context.Context, int) ([]byte, error), withResult bool) ([][]byte, []error) {
	n := len(keys)
	r := &eachRun{
		d: d, ctx: ctx, st: eachStore(d.st), keys: keys, fn: fn, withResult: withResult, start: time.Now(),
		first: make([]int, n), claims: make([]Claim, n), claimed: make([]time.Time, n),
		lost: make([]error, n), results: make([][]byte, n), errs: make([]error, n),
	}
	if !r.payloads() {
		return r.results, r.errs
	}
	held, busy := r.claimAll(r.sortOut())
	r.runAll(held)
	if len(busy) > 0 && r.d.wait > 0 && !r.stopped {
		// Only now: a batch that waited before running its own keys could
		// wait for a batch waiting for it.
		held, busy = r.waitAll(busy)
		r.runAll(held)
	}
	r.inFlight(busy)
	r.copyRepeats()
	if r.panic != nil {
		panic(r.panic)
	}
	return r.results, r.errs
}

// sortOut refuses the invalid keys, finds the repeated ones, answers those
// whose mark is queued in the backlog, and returns the indices left to claim.
func (r *eachRun) sortOut() []int {
	seen := make(map[Key]int, len(r.keys))
	pending := make([]int, 0, len(r.keys))
	for i, k := range r.keys {
		if err := k.Validate(); err != nil {
			r.first[i], r.errs[i] = -1, err
			continue
		}
		if j, ok := seen[k]; ok {
			r.first[i] = j
			continue
		}
		seen[k], r.first[i] = i, i
		if res, ok := r.d.shared.backlog.markQueued(k); ok {
			r.copyOf(i, res, backlogPhase)
			continue
		}
		pending = append(pending, i)
	}
	return pending
}

// claimAll claims the keys of pending and returns those claimed and those
// in flight, in order; it answers the others.
func (r *eachRun) claimAll(pending []int) (held, busy []int) {
	now := time.Now()
	for _, i := range pending {
		r.claims[i], r.claimed[i] = NewClaim(r.keys[i]), now
	}
	held, busy, failed := r.claimEach(r.ctx, pending)
	r.storeFailed(failed)
	return held, busy
}

// waitAll waits for the keys of busy, in flight elsewhere ([WithWait]), and
// returns those it claimed, in order, and those still in flight.
func (r *eachRun) waitAll(busy []int) (held, still []int) {
	held, still, failed := r.waitEach(busy)
	slices.Sort(held)
	r.storeFailed(failed)
	return held, still
}

// storeFailed answers the keys whose claim failed.
func (r *eachRun) storeFailed(failed []int) {
	for _, i := range failed {
		r.d.decided(r.ctx, r.keys[i], resultStoreError, "", r.start, r.errs[i])
	}
}

// inFlight answers the keys of busy, held by other callers.
func (r *eachRun) inFlight(busy []int) {
	for _, i := range busy {
		r.d.shared.counters.inFlight.Add(1)
		r.errs[i] = ErrInFlight
		r.d.decided(r.ctx, r.keys[i], resultInFlight, "", r.start, nil)
	}
}

// claimEach asks the store for the claims of idx at once, settling the
// ambiguous failures as Do does (claimSettled), and sorts the keys: claimed,
// in flight, or failed (their errors set); a duplicate is answered.
func (r *eachRun) claimEach(ctx context.Context, idx []int) (held, busy, failed []int) {
	if len(idx) == 0 {
		return nil, nil, nil
	}
	d := r.d
	claims := make([]Claim, len(idx))
	for n, i := range idx {
		claims[n] = r.claims[i]
	}
	var status []Status
	var errs []error
	_ = d.timed(ctx, phaseClaim, func(ctx context.Context) error {
		status, errs = claimEachSettled(ctx, r.st, d.st, claims, d.lease, d.shared.backlog)
		return nil
	})
	for n, i := range idx {
		switch {
		case errs[n] != nil:
			d.storeError(ctx, r.keys[i], d.st, phaseClaim, errs[n])
			r.errs[i] = errs[n]
			failed = append(failed, i)
		case status[n] == Claimed:
			held = append(held, i)
		case status[n] == InFlight:
			busy = append(busy, i)
		case status[n] == Duplicate:
			r.duplicate(i)
		default:
			d.shared.counters.storeErrors.Add(1)
			r.errs[i] = fmt.Errorf("dedupe: %s store returned claim status %d", d.st.Backend(), status[n])
			failed = append(failed, i)
		}
	}
	return held, busy, failed
}

// duplicate answers key i as processed elsewhere, with its kept result.
func (r *eachRun) duplicate(i int) {
	var kept []byte
	if r.withResult || r.pay.fps != nil {
		kept = r.d.storedResult(r.ctx, r.keys[i])
	}
	r.copyOf(i, kept, "")
}

// claimEachSettled is claimSettled for a batch: the claims whose call failed
// in a way that leaves it unknown whether the store took them are asked once
// more with the same tokens while ctx lives, and released by their tokens if
// that fails too or finds them in flight. st is bs's Store, for the backlog.
func claimEachSettled(ctx context.Context, bs BatchStore, st Store, claims []Claim, lease time.Duration, b *backlog) ([]Status, []error) {
	status, errs := bs.ClaimEach(ctx, claims, lease)
	var again, retry []int
	for n, err := range errs {
		if err != nil && ambiguous(err) {
			again = append(again, n)
			if ctx.Err() == nil && !isContextErr(err) {
				retry = append(retry, n)
			}
		}
	}
	if len(again) == 0 {
		return status, errs
	}
	b.cs.ambiguous.Add(uint64(len(again)))
	var spent []Claim
	if len(retry) > 0 {
		s2, e2 := bs.ClaimEach(ctx, pick(claims, retry), lease)
		for m, n := range retry {
			if e2[m] == nil {
				status[n], errs[n] = s2[m], nil
				if s2[m] == InFlight {
					spent = append(spent, claims[n])
				}
			}
		}
	}
	for _, n := range again {
		if errs[n] != nil {
			spent = append(spent, claims[n])
		}
	}
	abandonEach(ctx, bs, st, spent, lease, b)
	return status, errs
}

// abandonEach is abandon for a batch.
func abandonEach(ctx context.Context, bs BatchStore, st Store, claims []Claim, lease time.Duration, b *backlog) {
	if len(claims) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	errs := bs.ReleaseEach(rctx, claims)
	cancel()
	for n, err := range errs {
		if err != nil && !errors.Is(err, ErrNotOwner) && ambiguous(err) {
			b.cs.storeErrors.Add(1)
			b.queueRelease(st, claims[n], lease)
		}
	}
}

// pick returns the items of s at the positions idx.
func pick[T any](s []T, idx []int) []T {
	out := make([]T, len(idx))
	for m, n := range idx {
		out[m] = s[n]
	}
	return out
}

// waitEach asks again, with a backoff and new tokens, for the keys of busy
// while other callers hold them, for at most the Deduper's wait, as Do's
// wait does; it returns the keys it claimed, those still in flight and
// those whose claim failed.
func (r *eachRun) waitEach(busy []int) (held, still, failed []int) {
	cs := &r.d.shared.counters
	cs.waits.Add(uint64(len(busy)))
	wctx, cancel := context.WithTimeout(r.ctx, r.d.wait)
	defer cancel()
	timer := time.NewTimer(minWaitBackoff)
	defer timer.Stop()
	for backoff := minWaitBackoff; len(busy) > 0; backoff = min(2*backoff, maxWaitBackoff) {
		select {
		case <-wctx.Done():
			cs.waitsTimedOut.Add(uint64(len(busy)))
			return held, append(still, busy...), failed
		case <-timer.C:
		}
		asked := time.Now()
		for _, i := range busy {
			r.claims[i], r.claimed[i] = NewClaim(r.keys[i]), asked
		}
		ask := busy
		got, more, fails := r.claimEach(wctx, ask)
		held, busy = append(held, got...), more
		cs.waitsClaimed.Add(uint64(len(got)))
		for _, i := range fails {
			if wctx.Err() != nil && r.ctx.Err() == nil {
				r.errs[i] = nil // the wait ended during the call: in flight
				cs.waitsTimedOut.Add(1)
				still = append(still, i)
				continue
			}
			failed = append(failed, i)
		}
		for _, i := range ask {
			if errors.Is(r.errs[i], ErrDuplicate) {
				cs.waitsDuplicate.Add(1)
			}
		}
		timer.Reset(min(2*backoff, maxWaitBackoff))
	}
	return held, still, failed
}

// copyRepeats gives each repeated key its first place's outcome: a
// processed key is a duplicate at its other places.
func (r *eachRun) copyRepeats() {
	for i, j := range r.first {
		if j < 0 || j == i || r.repeatDiffers(i, j) {
			continue
		}
		r.results[i], r.errs[i] = r.results[j], r.errs[j]
		if r.errs[j] == nil {
			r.errs[i] = ErrDuplicate
			r.d.shared.counters.duplicates.Add(1)
		}
	}
}

// runAll runs fn for each claimed key of held, in order or up to the
// Deduper's concurrency at once, under one hold of their leases, and settles
// each: marked once its fn succeeded, released once it failed.
func (r *eachRun) runAll(held []int) {
	if len(held) == 0 {
		return
	}
	h := r.d.holdEach(r.ctx, r.st, r.claims, r.claimed, held)
	s := &eachSettler{r: r}
	defer func() { // also when a fn called runtime.Goexit
		for _, i := range held {
			if h.unstarted(i) {
				r.notRun(i, h, s)
			}
		}
		s.flush()
		s.wait()
		h.stopAll()
		r.finishMarks(s.queued)
	}()
	if r.d.concurrency <= 1 {
		for _, i := range held {
			r.runOne(i, h, s)
		}
		return
	}
	work := make(chan int, len(held)) // filled first: a worker that exits by runtime.Goexit blocks nobody
	for _, i := range held {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	for range min(r.d.concurrency, len(held)) {
		wg.Go(func() {
			for i := range work {
				r.runOne(i, h, s)
			}
		})
	}
	wg.Wait()
}

// runOne runs fn for key i unless the batch stopped, its context ended or
// its lease was lost before it started, and hands the key to s.
func (r *eachRun) runOne(i int, h *eachHold, s *eachSettler) {
	r.mu.Lock()
	stopped := r.stopped
	r.mu.Unlock()
	fctx, lost := h.start(i)
	if stopped || lost != nil || r.ctx.Err() != nil {
		r.notRun(i, h, s)
		return
	}
	returned := false
	defer func() {
		if returned {
			return
		}
		p := recover()
		r.mu.Lock()
		if r.panic == nil {
			r.panic = p // nil for runtime.Goexit, which goes on unwinding
		}
		r.stopped = true
		r.mu.Unlock()
		r.failed(i, errFnPanicked, h.stop(i), s)
	}()
	res, err := r.fn(fctx, i)
	returned = true
	r.lost[i] = h.stop(i)
	if r.withResult {
		r.results[i] = res
	}
	if err != nil {
		r.failed(i, err, r.lost[i], s)
		return
	}
	s.mark(i, r.d.framed(r.ctx, r.keys[i], fpAt(r.pay.fps, i), res))
}

// notRun releases key i, whose fn is not run: the batch stopped, ctx ended
// or the lease was lost first.
func (r *eachRun) notRun(i int, h *eachHold, s *eachSettler) {
	lost := h.stop(i)
	err := r.ctx.Err()
	switch {
	case lost != nil:
		err = fmt.Errorf("dedupe: %s not run: %w", r.keys[i], lost)
	case err == nil:
		err = fmt.Errorf("dedupe: %s not run: %w", r.keys[i], errFnPanicked)
	}
	r.errs[i] = err
	r.d.shared.counters.failed.Add(1)
	r.d.decided(r.ctx, r.keys[i], resultFailed, "", r.start, err)
	s.release(i)
}

// failed releases key i after its fn failed with err, its lease lost if
// lost is not nil.
func (r *eachRun) failed(i int, err, lost error, s *eachSettler) {
	r.d.shared.counters.failed.Add(1)
	result := resultFailed
	if lost != nil && err != errFnPanicked {
		err = fmt.Errorf("dedupe: %s abandoned: %w: %w", r.keys[i], lost, err)
		result = resultAbandoned
	}
	r.errs[i] = err
	r.d.decided(r.ctx, r.keys[i], result, "", r.start, err)
	s.release(i)
}

// processed answers key i, marked.
func (r *eachRun) processed(i int) {
	r.d.shared.counters.processed.Add(1)
	if r.lost[i] != nil {
		r.d.log(r.ctx, slog.LevelWarn, "dedupe: processed after its lease ran out", r.keys[i], phaseMark, r.lost[i])
	}
	r.d.decided(r.ctx, r.keys[i], resultProcessed, "", r.start, nil)
}

// eachSettler marks and releases the keys of a batch as their fns return:
// it sends those waiting at once, in one MarkEach and one ReleaseEach, as
// soon as no round trip of it is in flight. Its goroutine ends when nothing
// waits; wait waits for it.
type eachSettler struct {
	r        *eachRun
	mu       sync.Mutex
	marks    []int
	kept     [][]byte // the result kept with each mark
	releases []int
	running  bool
	timer    *time.Timer // the start of the goroutine, settleDelay after a key waits
	wg       sync.WaitGroup
	queued   []eachQueued // marks the store did not take, queued in the backlog
}

// eachQueued is a mark of a batch queued in the backlog.
type eachQueued struct {
	i   int
	j   *job
	err error
}

func (s *eachSettler) mark(i int, kept []byte) {
	s.mu.Lock()
	s.marks, s.kept = append(s.marks, i), append(s.kept, kept)
	s.soon()
	s.mu.Unlock()
}

func (s *eachSettler) release(i int) {
	s.mu.Lock()
	s.releases = append(s.releases, i)
	s.soon()
	s.mu.Unlock()
}

// settleDelay is how long a key's mark or release waits for those of the
// keys whose fns return after it, unless a round trip of the batch is in
// flight or every fn of the batch has returned: the fns of a batch that
// return at once (a handler that queues its work) are settled in one round
// trip, and a slow fn delays its predecessors' marks by no more than this.
const settleDelay = time.Millisecond

// soon starts the settler's goroutine within settleDelay, unless it runs.
// Called with mu held.
func (s *eachSettler) soon() {
	if s.running || s.timer != nil {
		return
	}
	s.timer = time.AfterFunc(settleDelay, func() {
		s.mu.Lock()
		s.timer = nil
		if len(s.marks)+len(s.releases) > 0 {
			s.kick()
		}
		s.mu.Unlock()
	})
}

// kick starts the settler's goroutine if it is not running. Called with mu
// held.
func (s *eachSettler) kick() {
	if !s.running {
		s.running = true
		s.wg.Add(1)
		go s.loop()
	}
}

// flush starts the settler's goroutine at once for what waits: every fn of
// the batch has returned.
func (s *eachSettler) flush() {
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if len(s.marks)+len(s.releases) > 0 {
		s.kick()
	}
	s.mu.Unlock()
}

func (s *eachSettler) loop() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		marks, kept, releases := s.marks, s.kept, s.releases
		s.marks, s.kept, s.releases = nil, nil, nil
		if len(marks)+len(releases) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.r.markEach(marks, kept, s)
		s.r.releaseEach(releases)
	}
}

// wait waits until every key handed to s is settled. Call it once no more
// keys will be.
func (s *eachSettler) wait() { s.wg.Wait() }

// markEach marks the keys of idx, with the results kept, in one MarkEach. A
// mark the store did not take is queued in the backlog, as Do queues it.
func (r *eachRun) markEach(idx []int, kept [][]byte, s *eachSettler) {
	if len(idx) == 0 {
		return
	}
	d := r.d
	keys := pick(r.keys, idx)
	if !slices.ContainsFunc(kept, func(b []byte) bool { return len(b) > 0 }) {
		kept = nil
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), cleanupTimeout)
	defer cancel()
	var errs []error
	_ = d.timed(mctx, phaseMark, func(ctx context.Context) error {
		errs = r.st.MarkEach(ctx, keys, kept, d.ttl)
		return nil
	})
	for n, i := range idx {
		err := errs[n]
		if err == nil {
			r.processed(i)
			continue
		}
		d.storeError(r.ctx, keys[n], d.st, phaseMark, err)
		if ambiguous(err) {
			var res []byte
			if kept != nil {
				res = kept[n]
			}
			s.queued = append(s.queued, eachQueued{i, d.shared.backlog.queueMark(d.st, keys[n], res, d.ttl), err})
			continue
		}
		r.notMarked(i, err)
	}
}

// notMarked answers key i, processed but not marked.
func (r *eachRun) notMarked(i int, err error) {
	r.errs[i] = fmt.Errorf("dedupe: %s processed but not marked: %w", r.keys[i], err)
	r.d.decided(r.ctx, r.keys[i], resultStoreError, "", r.start, r.errs[i])
}

// finishMarks waits up to cleanupTimeout for the marks queued in the backlog,
// as Do waits for its one.
func (r *eachRun) finishMarks(queued []eachQueued) {
	if len(queued) == 0 {
		return
	}
	deadline := time.NewTimer(cleanupTimeout)
	defer deadline.Stop()
	expired := false
	for _, q := range queued {
		if !expired {
			select {
			case <-q.j.done:
			case <-deadline.C:
				expired = true
			}
		}
		if !q.j.leave(&r.d.shared.counters) && q.j.err == nil {
			r.processed(q.i) // a retry wrote it
			continue
		}
		r.notMarked(q.i, q.err)
	}
}

// releaseEach releases the claims of the keys of idx in one ReleaseEach. A
// release the store did not take is queued in the backlog.
func (r *eachRun) releaseEach(idx []int) {
	if len(idx) == 0 {
		return
	}
	d := r.d
	claims := pick(r.claims, idx)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), cleanupTimeout)
	defer cancel()
	var errs []error
	_ = d.timed(rctx, phaseRelease, func(ctx context.Context) error {
		errs = r.st.ReleaseEach(ctx, claims)
		return nil
	})
	for n, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, ErrNotOwner):
			d.shared.counters.leasesLost.Add(1)
			d.log(r.ctx, slog.LevelWarn, "dedupe: claim lost before release", claims[n].Key, phaseRelease, err)
		default:
			d.storeError(r.ctx, claims[n].Key, d.st, phaseRelease, err)
			if ambiguous(err) {
				d.shared.backlog.queueRelease(d.st, claims[n], d.lease)
			}
		}
	}
}
