package dedupehttp

import (
	"fmt"
	"net/http"

	"github.com/gatewaykit/dedupe"
)

// AnswerInFlight answers r, from within the handler of [New], [Middleware]
// or [Async], as a copy of a message in flight: with the [WithInFlight]
// answer (503 with Retry-After by default) and [HeaderVerdict] "in_flight",
// as the middleware answers a copy whose claim another request holds. It is
// for a handler that finds part of its work held by another process, such
// as a reply that package reply's Sender.Send will not send because another
// sender (maybe one that died, until its lock's lease runs out) holds it
// (an error matching [dedupe.ErrInFlight]):
//
//	if _, err := sender.Send(ctx, key, 0, compose, send); errors.Is(err, dedupe.ErrInFlight) {
//		dedupehttp.AnswerInFlight(w, r)
//		return
//	}
//
// The message's claim is released, not marked, so that the platform's
// retry runs the handler again; the delivery's [Outcome] is in_flight, and
// it is logged at debug level, not warned of as a failed handler. Under
// [Async] with a queue, the message is put back and taken again after half
// its visibility timeout, and that take does not count as an attempt; in
// Async's memory tier, which cannot take a message again, it is a failed
// handler (reported to [WithDone] with an error matching
// [dedupe.ErrInFlight]). Outside these handlers (w is not, and
// does not unwrap to, theirs), AnswerInFlight answers 503 with
// Retry-After: 1.
func AnswerInFlight(w http.ResponseWriter, r *http.Request) {
	for u := w; u != nil; {
		switch m := u.(type) {
		case *run:
			m.inFlight = true
			m.d.verdict = VerdictInFlight
			w.Header().Set(HeaderVerdict, string(VerdictInFlight))
			m.h.c.inFlight.ServeHTTP(w, r)
			return
		case *discardWriter:
			m.inFlight = true
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case interface{ Unwrap() http.ResponseWriter }:
			u = m.Unwrap()
		default:
			u = nil
		}
	}
	w.Header().Set("Retry-After", "1")
	w.Header().Set(HeaderVerdict, string(VerdictInFlight))
	http.Error(w, "message in flight, retry later", http.StatusServiceUnavailable)
}

// errAnsweredInFlight is the error of a handler that called AnswerInFlight.
var errAnsweredInFlight = fmt.Errorf("dedupe: dedupehttp: the handler answered in flight: %w", dedupe.ErrInFlight)
