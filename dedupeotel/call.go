package dedupeotel

import (
	"context"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe"
	"go.opentelemetry.io/otel/trace"
)

// call is what the spans of one Do (or one delivery) share: the context of
// the Do's span, and the wait for an in-flight copy derived from its claims.
// The claims of a Do come one after another; mu guards a caller that shares
// a Do's context between goroutines. Spans are started and ended outside mu.
type call struct {
	ctx context.Context // carries the Do's span

	mu        sync.Mutex
	seen      string     // the verdict the handler saw (Annotate)
	waitStart time.Time  // the end of the first claim that found the copy in flight
	wait      trace.Span // the wait span, once a second claim was asked
	polls     int64      // the claims asked during the wait
	last      poll       // the latest of them, whose span is made when the wait ends
}

// poll is a claim asked during a wait: a span is made of it, after it
// returned, only if it was the wait's last.
type poll struct {
	s          *Store
	key        dedupe.Key
	start, end time.Time
	status     dedupe.Status
	err        error
}

type callKey struct{}

// withCall returns ctx carrying a new call whose span ctx carries.
func withCall(ctx context.Context) (context.Context, *call) {
	cl := &call{}
	ctx = context.WithValue(ctx, callKey{}, cl)
	cl.ctx = ctx
	return ctx, cl
}

// callFrom returns the call ctx carries, or nil.
func callFrom(ctx context.Context) *call {
	cl, _ := ctx.Value(callKey{}).(*call)
	return cl
}

// polling returns the context of a claim asked while a wait is on (an
// earlier claim of the Do found the copy in flight), which carries the wait
// span, starting it from the end of that claim; and true. Outside a wait it
// returns ctx and false: the claim is a span of its own.
func (cl *call) polling(ctx context.Context, tracer trace.Tracer) (context.Context, bool) {
	if cl == nil {
		return ctx, false
	}
	cl.mu.Lock()
	start, wait := cl.waitStart, cl.wait
	cl.mu.Unlock()
	if start.IsZero() {
		return ctx, false
	}
	if wait == nil {
		_, wait = tracer.Start(cl.ctx, "dedupe.wait", trace.WithTimestamp(start))
		cl.mu.Lock()
		cl.wait = wait
		cl.mu.Unlock()
	}
	return trace.ContextWithSpan(ctx, wait), true
}

// polled counts a claim asked during the wait; one that found the message
// no longer in flight (claimed, or duplicate) ends the wait.
func (cl *call) polled(p poll) {
	cl.mu.Lock()
	cl.polls++
	cl.last = p
	if p.err != nil || p.status == dedupe.InFlight {
		cl.mu.Unlock()
		return
	}
	w := cl.takeWait()
	cl.mu.Unlock()
	w.end(p.status.String())
}

// afterClaim notes the answer of a claim outside a wait: in flight starts
// one.
func (cl *call) afterClaim(status dedupe.Status, err error) {
	if cl == nil || err != nil || status != dedupe.InFlight {
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.waitStart.IsZero() {
		cl.waitStart = time.Now()
	}
}

// finish ends a wait still open at the end of the Do, whose verdict it was.
func (cl *call) finish(verdict string) {
	cl.mu.Lock()
	w := cl.takeWait()
	cl.mu.Unlock()
	w.end(verdict)
}

// endingWait is a wait taken from its call, to end.
type endingWait struct {
	span  trace.Span // nil if no claim was asked during the wait
	polls int64
	last  poll
}

// takeWait returns the wait and forgets it. Called with mu held.
func (cl *call) takeWait() endingWait {
	w := endingWait{span: cl.wait, polls: cl.polls, last: cl.last}
	cl.waitStart, cl.wait, cl.polls, cl.last = time.Time{}, nil, 0, poll{}
	return w
}

// end makes the span of the wait's last claim and ends the wait with its
// result and the number of claims asked.
func (w endingWait) end(result string) {
	if w.span == nil {
		return
	}
	if w.last.s != nil {
		w.last.s.pollSpan(trace.ContextWithSpan(context.Background(), w.span), w.last)
	}
	w.span.SetAttributes(WaitResultKey.String(result), WaitPollsKey.Int64(w.polls))
	w.span.End()
}

// setVerdict notes the verdict the delivery's handler saw.
func (cl *call) setVerdict(v string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.seen = v
}

// verdict returns the verdict the delivery's handler saw, or "".
func (cl *call) verdict() string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.seen
}
