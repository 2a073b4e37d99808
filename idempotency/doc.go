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
//	key not an sf-string        400 key-malformed (2.1; ParseKey); a bare key is told to
//	                            quote itself, or taken as it is WithBareKeys
//	new key                     the handler runs and answers (2.6 "First time request")
//	new key, quota used         503 over-quota with Retry-After (see Quota)
//	key processed, same request the first response, with Idempotent-Replayed: true (2.6 "Retry")
//	key in flight, same request 409 key-in-flight with Retry-After (2.6 "Concurrent Request";
//	                            see Interrupted requests); with WithWait, waits and is
//	                            answered as a retry
//	key used, another request   422 key-reused (2.7), processed or in flight
//	first response too large    409 not-replayable (see below)
//	store failing               503 unavailable with Retry-After: 1
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
// key-reused, not-replayable, body-too-large, body-unreadable, unavailable,
// over-quota.
//
// Keys are Strings of RFC 9651, quoted, as the draft's section 2.1 asks:
// Idempotency-Key: "8e03978e-40d5". Stripe's clients, and others after them,
// send them bare (Idempotency-Key: 8e03978e-40d5). The default stays the
// draft's: the draft is the standard this package implements, a server that
// takes bare keys lets its clients' mistake live on until they meet a
// stricter one, and the refusal is loud and at once, with a detail that
// shows the key quoted. A server whose clients are Stripe's adds
// [WithBareKeys], which takes both forms as one key.
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
// and point [WithDocs] at it. The 422, not-replayable and over-quota problems
// state it. The promise holds as long as the store keeps the marks that
// long: a store that does not evict (SQLite, PostgreSQL, Redis without an
// eviction policy) does; a bounded one (the memory store, a
// [dedupe.Evicter]) does while it has room, which the quota keeps for the
// middleware's keys.
//
// # Quota
//
// A store that evicts marks to take new ones would let one caller's new
// keys evict another's inside its TTL, and that caller's retry run the
// handler again. So on such a store the middleware refuses new keys instead
// ([WithQuota]): it holds at most as many keys as take half the store's
// marks (2,500 keys in the memory store's default 10,000 marks), and with
// callers told apart ([WithScope], [WithCaller]) one caller at most an
// eighth of those, however many scopes it presents. A caller is what
// authenticates a request: by default its Authorization header, or else its
// TLS client certificate, or else its scope ([WithCaller] says how to name
// it otherwise). A key is held from its first request until the TTL after
// its request was processed; a request that left nothing in the store (the
// store failing, the key in flight elsewhere) gives its share back. A new
// key beyond either bound gets 503 over-quota, with a Retry-After that says
// when the first of the keys in its way expires (the caller's, or all keys'
// when the store's share is full), and is counted ([WithStats]); retries of
// keys held are served. A key held never gives way. Size the
// memory store's MaxSize for the keys of one TTL; on other stores there is
// no quota unless [WithQuota] sets one.
//
// # Interrupted requests
//
// A request whose process dies while the handler runs (a crash, a
// SIGKILL, a deploy that does not drain) holds its key until the claim's
// lease runs out: the Deduper's [dedupe.WithLease], from its last
// renewal. A retry meanwhile gets 409 key-in-flight, whose
// detail says so and whose Retry-After is what is left of the lease at
// most: the lease less the time the retry waited ([WithWait]). A retry of a
// request still running in this process gets Retry-After: 1, as it will
// answer soon. After the lease the retry runs the handler, as the first
// request did not finish. A shorter lease frees such keys sooner; the
// Deduper renews it while the handler runs, so it does not bound the
// handler.
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
