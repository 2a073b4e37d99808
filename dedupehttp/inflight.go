package dedupehttp

import (
	"fmt"
	"net/http"

	"github.com/gatewaykit/dedupe"
)

// AnswerInFlight answers r as a copy in flight ([WithInFlight]), for work
// another process holds (a reply whose Send returned [dedupe.ErrInFlight]):
// the claim is released, a queued message put back without an attempt.
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
