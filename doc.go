// Package dedupe makes a chat-bot or AI-agent gateway process every platform
// message exactly once. Platforms deliver webhooks at least once (retries on
// timeouts, proxies retrying 502s, restarts, several bots in one group); a
// gateway wraps its dispatch in [Deduper.Do] and each message runs once.
//
// Make one [Deduper] with [New] over a [Store] (nil is an in-memory
// [MemoryStore]) and run each delivery through [Deduper.Do]. Example, in
// example_test.go, is this gateway, compiled and run by go test:
//
//	d := dedupe.New(store) // dedupe.OpenSQLite, deduperedis.New, postgres.New, or nil
//	defer d.Close()
//	err := d.Do(ctx, dedupe.Key{Channel: "telegram", MessageID: id}, dispatch)
//	if errors.Is(err, dedupe.ErrDuplicate) || errors.Is(err, dedupe.ErrInFlight) {
//		err = nil // acknowledge: processed already, or being processed now
//	}
//	return err // a failure is released, so the platform's retry is processed
//
// For webhooks, package dedupehttp does this around a net/http handler and
// authenticates each platform first.
//
// # Keys, marks and claims
//
// A [Key] is "{channel}:{message_id}", the key the NekoBot Python gateway
// stores. A [Store] holds marks (processed; kept for a TTL, default 24 h) and
// claims (being processed; held for a lease, so a crashed gateway does not
// block a message for long: a [Deduper]'s is short and renewed while the
// function runs, [WithLease]; a bare [Store.Claim]'s, which nothing renews,
// is the store's, [DefaultLease]). A TTL or lease of 0 or less means
// the store's default. [Store.Claim] is one atomic step, idempotent by the
// token of a [Claim] the caller makes with [NewClaim]. Exists then Mark is two
// steps and races between concurrent copies: use Claim, or Do.
//
// # Exactly once around dispatch
//
// [Deduper.Do] claims the key, runs the function, and marks the key only after
// it succeeded: a failure is released for the platform's retry, and two copies
// never run at once. It renews the lease while the function runs, settles
// claims whose store call failed ambiguously, can wait for the owner of a copy
// in flight ([WithWait]), and can fail over to a local store ([WithFallback]).
// [Deduper.DoResult] also keeps the function's result with the mark and hands
// it to every copy, for platforms that show the answer and clients that retry.
// A copy is known by its key alone, unless [WithPayloadCheck] is on: then the
// mark keeps the fingerprint of the payload given with [WithPayload], and a
// copy whose payload differs (an id reused, a replay altered) is refused with
// [ErrPayloadMismatch] and counted.
//
// # Stores
//
// [MemoryStore] (the default) is a sharded LRU with TTLs, optionally
// snapshotted to disk; full, it evicts marks inside their TTL, which
// [Stats].Evicted counts; [SQLiteStore] survives restarts and shares NekoBot's
// table; [LayeredStore] puts a fast local layer in front of a shared one. The
// modules github.com/gatewaykit/dedupe/deduperedis and .../postgres are shared by
// many gateway instances. Package dedupetest is the conformance suite.
//
// # Cross-adapter correlation
//
// An [EventCorrelator] recognises one logical message delivered by several
// bots or adapters, with different ids, by a content [Signature] within a
// short window, and marks the copies without dropping them; package multibot
// routes them to handlers.
//
// Package platform (presets that authenticate each platform's webhooks),
// dedupehttp (net/http middleware), sequence (ordered processing) and the
// dedupeprom module (Prometheus metrics) complete the gateway kit. Every type in this package is
// safe for concurrent use unless its documentation says otherwise.
package dedupe
