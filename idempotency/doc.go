// Package idempotency makes an HTTP API's unsafe requests idempotent with
// the Idempotency-Key request header of draft-ietf-httpapi-idempotency-key-header-07
// (October 2025): a client sends a unique key with a POST, retries it with
// the same key after a timeout, and the handler runs once; the retry gets
// the first response again, byte for byte. It is for a gateway's own API,
// such as an AI agent's POST /v1/messages whose model call must not be paid
// twice; package dedupehttp is for the webhooks platforms deliver to it.
//
//	d := dedupe.New(store) // any store of this module: memory, SQLite, Redis, PostgreSQL
//	mw := idempotency.Middleware(d, idempotency.WithScope(callerID))
//	http.Handle("POST /v1/messages", mw(messages))
//
// # What it answers
//
// For a request of a covered method ([WithMethods]; POST and PATCH by
// default), section by section of the draft:
//
//	no Idempotency-Key          400 key-missing (2.7); passed through with WithOptional
//	key not an sf-string        400 key-malformed (2.1; ParseKey)
//	new key                     the handler runs and answers (2.6 "First time request")
//	key processed, same request the first response, with Idempotent-Replayed: true (2.6 "Retry")
//	key in flight, same request 409 key-in-flight with Retry-After (2.6 "Concurrent Request");
//	                            with WithWait, waits and is answered as a retry
//	key used, another request   422 key-reused (2.7), processed or in flight
//	first response too large    409 not-replayable (see below)
//	store failing               503 unavailable with Retry-After
//
// Other methods, and requests without a key under [WithOptional], pass to
// the handler untouched. A request is the same request when its fingerprint
// (2.4; [DefaultFingerprint]: method, path and query, SHA-256 of the body) is.
//
// # Problems
//
// Every answer of the middleware's own is an RFC 9457 problem
// (application/problem+json) with type, title, status and detail, and a
// Link to the documentation (rel="describedby"), as the draft's examples in
// section 2.7 show. The types are the documentation's URL ([WithDocs],
// [DefaultDocs]) with a fragment: key-missing, key-malformed, key-in-flight,
// key-reused, not-replayable, body-too-large, body-unreadable, unavailable.
//
// # What is stored, and for how long
//
// Each (scope, key) pair is two [dedupe.Key]s on channel "idem"
// ([WithChannel]) whose message id is the SHA-256 of the scope and the key:
// the keys of any length and content fit dedupe's limits, and neither is
// stored in clear. The first is claimed while the handler runs (so that two
// copies never run at once) and marked after it with the fingerprint and the
// response ([dedupe.Deduper.DoResult]): the status, the headers of
// [WithHeaders] and the body. The second binds the key to the fingerprint
// before the handler runs, so that a request reusing the key with another
// payload is told apart while the first is still in flight, and after a
// first run that failed: a key stays bound to its first payload for the TTL.
//
// A 5xx or 429 response, or a handler panic, is not stored: the claim is
// released and the client's retry runs the handler again. Stripe stores and
// replays 5xx answers; a gateway whose model call failed wants the retry to
// call it again. 4xx answers are stored and replayed, as Stripe does: they
// were the request's outcome. A response over [dedupe.MaxResultSize] (64 KiB
// with the record) is sent to the client but kept as a marker without it:
// the request was processed and is not run again, and a retry is answered
// 409 not-replayable. A store may also drop a result before its mark (the
// memory store bounds the bytes it keeps); that retry gets the same answer.
//
// Keys expire [DefaultTTL] (24 hours) after their request was processed
// ([WithTTL]); after it a key is new again. The draft's section 2.3 asks a
// resource to publish its expiry policy in its documentation: publish yours,
// and point [WithDocs] at it. The 422 and not-replayable problems state it.
//
// # Scope
//
// Without [WithScope], keys are shared by every caller: a caller who learns
// or guesses another's key can be replayed the other's response. Scope keys
// by the authenticated caller wherever the API has more than one, and put
// the middleware after the API's authentication: it stores a key for every
// covered request it serves, so an unauthenticated one should never reach
// it.
//
// The middleware is safe for concurrent use, and so are the handlers it
// returns. The handler's ResponseWriter passes everything to the client as
// it is written, flushes, and unwraps for [http.ResponseController]. The
// request body is read (up to [WithMaxBody], 413 beyond) to fingerprint it
// and given to the handler whole.
package idempotency
