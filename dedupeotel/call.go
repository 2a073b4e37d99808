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
// a Do's context between goroutines.
type call struct {
	ctx context.Context // carries the Do's span

	mu        sync.Mutex
	seen      string     // the verdict the handler saw (Annotate)
	waitStart time.Time  // the end of the first claim that found the copy in flight
	wait      trace.Span // the wait span, once a second claim was asked
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

// beforeClaim returns the context of a claim's span: under the wait span if
// an earlier claim of the Do found the copy in flight (starting the span,
// from the end of that claim, at the second).
func (cl *call) beforeClaim(ctx context.Context, tracer trace.Tracer) context.Context {
	if cl == nil {
		return ctx
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.waitStart.IsZero() {
		return ctx
	}
	if cl.wait == nil {
		_, cl.wait = tracer.Start(cl.ctx, "dedupe.wait", trace.WithTimestamp(cl.waitStart))
	}
	return trace.ContextWithSpan(ctx, cl.wait)
}

// afterClaim notes a claim's answer: in flight starts a wait; claimed or
// duplicate ends one.
func (cl *call) afterClaim(status dedupe.Status, err error) {
	if cl == nil || err != nil {
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	switch {
	case status == dedupe.InFlight && cl.waitStart.IsZero():
		cl.waitStart = time.Now()
	case status != dedupe.InFlight && cl.wait != nil:
		cl.endWait(status.String())
	}
}

// finish ends a wait still open at the end of the Do, whose verdict it was.
func (cl *call) finish(verdict string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.wait != nil {
		cl.endWait(verdict)
	}
}

// endWait ends the wait span with its result. Called with mu held.
func (cl *call) endWait(result string) {
	cl.wait.SetAttributes(WaitResultKey.String(result))
	cl.wait.End()
	cl.wait, cl.waitStart = nil, time.Time{}
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
