package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Storm delivers every message of a set three times to [dedupe.Deduper.Do]
// while a Proxy in front of the store's
// server drops replies for a while and then cuts its connections, round after
// round. Two copies of a message arrive at once, with deadlines of a few
// milliseconds; the third arrives later, with a deadline of a second, and
// finds the message processed or processes it. Run then checks the promise of
// issue 11: no message ran twice, and no message was left stranded by a claim
// whose caller failed.
//
// The zero value gives the defaults.
type Storm struct {
	Keys     int           // messages, default 4000
	Workers  int           // concurrent deliveries, default 32
	Deadline time.Duration // the n-th early copy's deadline is n % (Deadline/ms + 1) ms; default 5 ms
	Rounds   int           // faults, each a drop and then a cut, default 3
	Drop     time.Duration // how long each round drops replies, default 300 ms
	// Settle bounds how long a message may stay in flight after the faults
	// while the Deduper's backlog releases the claims of failed calls,
	// default 15 s. Leases must be much longer, so that a stranded claim is
	// seen as one.
	Settle time.Duration
}

// Figures are the outcome of a Storm.
type Figures struct {
	Keys       int // messages
	Deliveries int // calls of Do during the faults
	Runs       int // runs of fn, in all
	Settled    int // messages first processed after the faults
	Doubles    int // messages whose fn ran more than once
	// FailedCalls counts deliveries that returned a store error without
	// running fn: their Claim failed (the claims the issue counts).
	FailedCalls int
	// Unmarked counts messages processed whose Mark failed: their claim holds
	// them until its lease runs out, so copies are refused, not run again.
	Unmarked int
	// Late counts messages never processed during the faults that were in
	// flight at first afterwards and free within Settle: the claim of a
	// failed call, released by the Deduper's backlog.
	Late int
	// Stranded counts messages never processed during the faults that were
	// still in flight after Settle: a claim nobody owns, holding its message
	// for a lease.
	Stranded int
	Proxy    Stats // what the proxy did
	Stats    dedupe.Stats
}

func (f Figures) String() string {
	return fmt.Sprintf("%d keys, %d deliveries, %d runs (%d after the faults), %d doubles, %d stranded (%d late), %d failed calls, "+
		"%d processed but unmarked; Deduper: %d ambiguous claims, %d store errors, %d dropped; "+
		"proxy: %d connections, %d cut, %d reply bytes dropped",
		f.Keys, f.Deliveries, f.Runs, f.Settled, f.Doubles, f.Stranded, f.Late, f.FailedCalls, f.Unmarked,
		f.Stats.Ambiguous, f.Stats.StoreErrors, f.Stats.Dropped, f.Proxy.Accepted, f.Proxy.Cut, f.Proxy.Dropped)
}

func (s *Storm) defaults() {
	if s.Keys <= 0 {
		s.Keys = 4000
	}
	if s.Workers <= 0 {
		s.Workers = 32
	}
	if s.Deadline <= 0 {
		s.Deadline = 5 * time.Millisecond
	}
	if s.Rounds <= 0 {
		s.Rounds = 3
	}
	if s.Drop <= 0 {
		s.Drop = 300 * time.Millisecond
	}
	if s.Settle <= 0 {
		s.Settle = 15 * time.Second
	}
}

// Run runs the storm through d, whose store reaches its server through p,
// on keys of channel "storm" with ids starting with prefix, and fails t if a
// message ran twice, a copy of a processed message ran, or a message was
// stranded.
func (s Storm) Run(t *testing.T, d *dedupe.Deduper, p *Proxy, prefix string) Figures {
	t.Helper()
	s.defaults()
	w := &storm{Storm: s, d: d, runs: make([]atomic.Int32, s.Keys), marked: make([]atomic.Bool, s.Keys)}
	w.keys = make([]dedupe.Key, s.Keys)
	for i := range w.keys {
		w.keys[i] = dedupe.Key{Channel: "storm", MessageID: fmt.Sprintf("%s-%d", prefix, i)}
	}
	w.order = deliveries(s.Keys)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range s.Workers {
		wg.Go(w.work)
	}
	go func() { wg.Wait(); close(done) }()
	w.faults(p, done)
	<-done

	f := w.settle(t)
	f.Proxy = p.Stats()
	f.Stats = d.Stats()
	if f.Doubles > 0 {
		t.Errorf("%d messages ran more than once", f.Doubles)
	}
	if f.Stranded > 0 {
		t.Errorf("%d messages stranded: in flight %v after the faults, long after every failed call", f.Stranded, s.Settle)
	}
	if f.Proxy.Dropped == 0 || f.Proxy.Cut == 0 {
		t.Errorf("the faults did not happen: %+v", f.Proxy)
	}
	return f
}

// storm is the state of one Run.
type storm struct {
	Storm
	d      *dedupe.Deduper
	keys   []dedupe.Key
	order  []delivery
	next   atomic.Int64
	runs   []atomic.Int32
	marked []atomic.Bool // Do returned nil: processed and marked

	failed, unmarked, doubles atomic.Int64
}

// delivery is one call of Do: the message, and whether it is the late copy.
type delivery struct {
	key  int
	late bool
}

// lateDeadline is the deadline of the late copy of each message.
const lateDeadline = time.Second

// deliveries returns the order in which the keys are delivered: two copies of
// each key at once, and a third a quarter of the run later, after the first
// copies were processed or failed.
func deliveries(keys int) []delivery {
	late := keys / 4
	order := make([]delivery, 0, 3*keys)
	for r := 0; r < keys+late; r++ {
		if r < keys {
			order = append(order, delivery{key: r}, delivery{key: r})
		}
		if r >= late {
			order = append(order, delivery{key: r - late, late: true})
		}
	}
	return order
}

func (w *storm) work() {
	ms := int(w.Deadline/time.Millisecond) + 1
	for {
		n := int(w.next.Add(1) - 1)
		if n >= len(w.order) {
			return
		}
		i := w.order[n].key
		timeout := time.Duration(n%ms) * time.Millisecond
		if w.order[n].late {
			timeout = lateDeadline
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		ran := false
		err := w.d.Do(ctx, w.keys[i], func(context.Context) error {
			ran = true
			if w.runs[i].Add(1) > 1 {
				w.doubles.Add(1)
			}
			return nil
		})
		cancel()
		switch {
		case err == nil:
			w.marked[i].Store(true)
		case ran:
			w.unmarked.Add(1) // fn succeeded, the mark failed
		case !errors.Is(err, dedupe.ErrDuplicate) && !errors.Is(err, dedupe.ErrInFlight):
			w.failed.Add(1)
		}
	}
}

// faults runs the rounds of faults, spread over the deliveries, until done.
func (w *storm) faults(p *Proxy, done <-chan struct{}) {
	total := len(w.order)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for r := range w.Rounds {
		at := int64(total * (r + 1) / (w.Rounds + 2))
		for w.next.Load() < at {
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
		p.DropReplies(true)
		select {
		case <-done:
		case <-time.After(w.Drop):
		}
		p.DropReplies(false)
		p.Cut()
	}
}

// settle delivers every message once more, with a normal deadline, after the
// faults: a processed one must not run, any other must run now, or at least
// within Settle, once the Deduper's backlog released the claims of failed
// calls.
func (w *storm) settle(t *testing.T) Figures {
	t.Helper()
	f := Figures{Keys: w.Keys, Deliveries: len(w.order)}
	deadline := time.Now().Add(w.Settle)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= w.Keys {
					return
				}
				settled, late, stranded := w.again(t, i, deadline)
				mu.Lock()
				f.Settled += settled
				f.Late += late
				f.Stranded += stranded
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := range w.runs {
		f.Runs += int(w.runs[i].Load())
	}
	f.Doubles = int(w.doubles.Load())
	f.FailedCalls = int(w.failed.Load())
	f.Unmarked = int(w.unmarked.Load())
	return f
}

// again delivers message i once more after the faults and reports whether it
// was processed now, late or stranded.
func (w *storm) again(t *testing.T, i int, deadline time.Time) (settled, late, stranded int) {
	processed := w.runs[i].Load() > 0
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := w.d.Do(ctx, w.keys[i], func(context.Context) error {
			if w.runs[i].Add(1) > 1 {
				w.doubles.Add(1)
			}
			return nil
		})
		cancel()
		switch {
		case processed && (errors.Is(err, dedupe.ErrDuplicate) || errors.Is(err, dedupe.ErrInFlight) && !w.marked[i].Load()):
			return 0, 0, 0 // refused, as it must be; in flight only if its Mark failed
		case processed:
			t.Errorf("%s: processed during the faults, delivered again: %v", w.keys[i], err)
			return 0, 0, 0
		case err == nil && attempt == 0:
			return 1, 0, 0
		case err == nil:
			return 1, 1, 0
		case errors.Is(err, dedupe.ErrInFlight) && time.Now().Before(deadline):
			time.Sleep(50 * time.Millisecond) // the backlog retries releases with a backoff
		case errors.Is(err, dedupe.ErrInFlight):
			return 0, 0, 1
		default:
			t.Errorf("%s: never processed, delivered after the faults: %v", w.keys[i], err)
			return 0, 0, 0
		}
	}
}
