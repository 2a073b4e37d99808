package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/internal/httpreplay"
)

// Middleware returns middleware that makes the covered methods of an HTTP
// API idempotent with d, by the Idempotency-Key request header: the handler
// runs once per key, and a retry gets the first response again. See the
// package overview for what it answers and what it stores. It keeps the
// bindings and responses with the marks of d's store ([dedupe.Store.MarkResult]);
// d's TTL and wait are replaced by [WithTTL]'s and [WithWait]'s; d's lease
// ([dedupe.WithLease]) is how long the key of a request interrupted in flight
// stays held. d must not be nil. The handlers one Middleware returns share
// its quota ([WithQuota]).
//
// The shape is net/http's middleware convention, as dedupehttp.Middleware's:
// it wraps any handler or router, for one route or all of them.
func Middleware(d *dedupe.Deduper, opts ...Option) func(http.Handler) http.Handler {
	c := newConfig(opts)
	rs := d.Store()
	q := newQuota(&c, rs)
	running := new(sync.Map)
	lease := d.Lease()
	wait := c.wait
	if wait <= 0 {
		wait = -1 // no wait: dedupe.WithWait(0) would keep d's own
	}
	d = d.With(dedupe.WithTTL(c.ttl), dedupe.WithWait(wait))
	return func(next http.Handler) http.Handler {
		return &handler{c: c, d: d, rs: rs, q: q, running: running, lease: lease, next: next}
	}
}

type handler struct {
	c       config
	d       *dedupe.Deduper
	rs      dedupe.Store // d's primary store, which keeps the bindings
	q       *quota       // nil without a quota
	running *sync.Map    // the main keys' ids of the runs in this process
	lease   time.Duration
	next    http.Handler
}

// Errors of a run under a claim that the handler did not answer, or whose
// answer is not stored.
var (
	errReused    = errors.New("idempotency: key bound to another fingerprint")
	errNotStored = errors.New("idempotency: response not stored")
)

// ServeHTTP serves r as [Middleware] says.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !slices.Contains(h.c.methods, r.Method) {
		h.next.ServeHTTP(w, r)
		return
	}
	fields := r.Header.Values("Idempotency-Key")
	if len(fields) == 0 {
		if h.c.optional {
			h.next.ServeHTTP(w, r)
			return
		}
		h.c.problem(w, keyMissing, detailRequired)
		return
	}
	key, err := h.c.parseKey(strings.Join(fields, ","))
	if err != nil {
		h.c.problem(w, keyMalformed, detailMalformed(strings.Join(fields, ","), err))
		return
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	fp := fingerprint(sha256.Sum256(h.c.fingerprint(r, body)))
	scope := h.c.scope(r)
	ks := keysFor(h.c.channel, scope, key)
	var caller string
	var ticket int64 // non-zero: the quota counted the key anew for this request
	if h.q != nil {
		caller = h.c.callerOf(r, scope)
		var ok bool
		if ok, ticket = h.admitted(w, r, caller, ks); !ok {
			return
		}
	}
	if h.c.wait > 0 {
		if refused, kept := h.refusedEarly(w, r, ks, fp); refused {
			h.settle(caller, ks, ticket, false, kept)
			return
		}
	}
	ran, kept := h.serve(w, r, ks, fp)
	h.settle(caller, ks, ticket, ran, kept)
}

// settle counts the key of ks for caller after its request: until the TTL
// after a run; not at all, if the quota counted it for this request and the
// request left nothing in the store (refused by a failing store, or in
// flight elsewhere), so that a failed request gives its share back.
func (h *handler) settle(caller string, ks keys, ticket int64, ran, kept bool) {
	switch {
	case h.q == nil:
	case ran:
		h.q.hold(caller, ks.main.MessageID) // held until the TTL after this run
	case !kept && ticket != 0:
		h.q.release(caller, ks.main.MessageID, ticket)
	}
}

// admitted counts the key of ks for caller against the quota, and returns
// true, unless the key is new and its caller or the store has no room: then
// it answers 503 over-quota with the time until room is made. A key the
// store holds already is not new, whatever the quota counted. ticket is
// the quota's for a key it counted anew.
func (h *handler) admitted(w http.ResponseWriter, r *http.Request, caller string, ks keys) (ok bool, ticket int64) {
	ok, after, ticket := h.q.admit(caller, ks.main.MessageID)
	if ok {
		return true, ticket
	}
	bound, err := h.boundTo(r.Context(), ks.bind)
	switch {
	case err != nil:
		h.c.problem(w, unavailable, detailUnavailable)
		return false, 0
	case bound != nil:
		h.q.hold(caller, ks.main.MessageID)
		return true, 0
	}
	h.c.stats.OverQuota.Add(1)
	h.c.retryProblem(w, overQuota, h.c.detailOverQuota(), after)
	return false, 0
}

// refusedEarly answers 422, and returns true, if the key is bound to another
// fingerprint: with WithWait, a reuse is told at once rather than after the
// first request, which the Deduper would wait for. kept is false if it
// answered for a failing store, which holds nothing of the request.
func (h *handler) refusedEarly(w http.ResponseWriter, r *http.Request, ks keys, fp fingerprint) (refused, kept bool) {
	bound, err := h.boundTo(r.Context(), ks.bind)
	switch {
	case err != nil:
		h.c.problem(w, unavailable, detailUnavailable)
		return true, false
	case bound != nil && *bound != fp:
		h.c.problem(w, keyReused, h.c.detailReused())
		return true, true
	}
	return false, true
}

// parseKey parses an Idempotency-Key field as the options say.
func (c *config) parseKey(field string) (string, error) {
	if c.bare {
		return parseBareKey(field)
	}
	return ParseKey(field)
}

// readBody reads r's body, to fingerprint it, and gives it back to r for
// the handler. It answers and returns false if it cannot.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.c.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.c.problem(w, bodyTooLarge, fmt.Sprintf("The body is over %d bytes.", h.c.maxBody))
		} else {
			h.c.problem(w, bodyUnreadable, err.Error())
		}
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}

// serve runs the handler under the claim of ks.main, unless another request
// holds or held it, and answers for the handler if it did not run. It
// reports whether the handler ran, and whether the store holds the key
// after the request (kept is false when another request holds its claim or
// the store failed).
func (h *handler) serve(w http.ResponseWriter, r *http.Request, ks keys, fp fingerprint) (ran, kept bool) {
	rec := httpreplay.NewRecorder(w, httpreplay.Config{
		Headers: h.c.headers,
		Limit:   dedupe.MaxResultSize - recordOverhead,
	})
	start := h.c.now()
	res, err := h.d.DoResult(r.Context(), ks.main, func(ctx context.Context) ([]byte, error) {
		if err := h.bind(ctx, ks.bind, fp); err != nil {
			return nil, err
		}
		ran = true
		h.running.Store(ks.main.MessageID, struct{}{})
		defer h.running.Delete(ks.main.MessageID)
		h.next.ServeHTTP(rec, r.WithContext(ctx))
		return h.record(rec, fp)
	})
	if ran {
		return true, true // the handler answered; the Deduper logs a mark that failed
	}
	switch {
	case errors.Is(err, dedupe.ErrDuplicate):
		h.replay(w, res, fp)
	case errors.Is(err, dedupe.ErrInFlight):
		if bound, _ := h.boundTo(r.Context(), ks.bind); bound != nil && *bound != fp {
			h.c.problem(w, keyReused, h.c.detailReused())
			return false, true
		}
		h.inFlight(w, ks, start)
		return false, false
	case errors.Is(err, errReused):
		h.c.problem(w, keyReused, h.c.detailReused())
	default:
		h.c.problem(w, unavailable, detailUnavailable)
		return false, false
	}
	return false, true
}

// inFlight answers 409 for a key whose claim another request held since
// before since. A run of this process is alive and answers soon: Retry-After
// is 1 s. Any other, in another process or interrupted (its process died),
// holds the key until its lease runs out: as its last renewal came before
// since, Retry-After is the lease less the time since, the longest a retry
// may still find the key held by a request that stopped.
func (h *handler) inFlight(w http.ResponseWriter, ks keys, since time.Time) {
	if _, ok := h.running.Load(ks.main.MessageID); ok {
		h.c.retryProblem(w, keyInFlight, detailInFlight, time.Second)
		return
	}
	h.c.retryProblem(w, keyInFlight, h.c.detailInterrupted(h.lease), h.lease-h.c.now().Sub(since))
}

// bind binds the key whose binding is bind to fp, under its claim, before
// the handler runs: it fails with errReused if the key is bound to another
// fingerprint, by a request whose handler ran before (and failed, or its
// mark would have answered this one).
func (h *handler) bind(ctx context.Context, bind dedupe.Key, fp fingerprint) error {
	bound, err := h.boundTo(ctx, bind)
	switch {
	case err != nil:
		return err
	case bound != nil && *bound != fp:
		return errReused
	}
	return h.rs.MarkResult(ctx, bind, encodeRecord(fp, nil), h.c.ttl)
}

// boundTo returns the fingerprint the key whose binding is bind is bound
// to, or nil if none (or none readable).
func (h *handler) boundTo(ctx context.Context, bind dedupe.Key) (*fingerprint, error) {
	b, marked, err := h.rs.Result(ctx, bind)
	if err != nil || !marked {
		return nil, err
	}
	fp, _, ok := decodeRecord(b)
	if !ok {
		return nil, nil
	}
	return &fp, nil
}

// record returns what is kept with the key's mark after the handler
// answered rec: the fingerprint and the response, or the fingerprint alone
// if the response is too large to keep. A 5xx or 429 answer is not kept:
// errNotStored releases the claim, so that the client's retry runs.
func (h *handler) record(rec *httpreplay.Recorder, fp fingerprint) ([]byte, error) {
	rec.Response() // settles the status of a handler that wrote nothing: 200
	if status := rec.Status(); status >= 500 || status == http.StatusTooManyRequests {
		return nil, fmt.Errorf("%w: status %d", errNotStored, status)
	}
	b, err := rec.Encode()
	if err != nil {
		b = nil // marked all the same: the request was processed
	}
	return encodeRecord(fp, b), nil
}

// replay answers a retry of a processed request with the record res kept
// with its key.
func (h *handler) replay(w http.ResponseWriter, res []byte, fp fingerprint) {
	bound, resp, ok := decodeRecord(res)
	if ok && bound != fp {
		h.c.problem(w, keyReused, h.c.detailReused())
		return
	}
	decoded, err := httpreplay.Decode(resp)
	if !ok || err != nil {
		h.c.problem(w, notReplayable, h.c.detailNotReplayable())
		return
	}
	w.Header().Set(HeaderReplayed, "true")
	_ = decoded.Replay(w)
}
