// Package dedupewatermill runs each message that a Watermill router
// (github.com/ThreeDotsLabs/watermill) handles once, with a
// [dedupe.Deduper], however often the broker delivers it: a redelivery after
// a nack or a lost ack, a consumer group rebalanced mid-message, a
// publisher's retry, a second router consuming the same topic.
//
// [Middleware] is a [message.HandlerMiddleware]; add it to a router, or to one
// handler:
//
//	d := dedupe.New(store) // Redis or PostgreSQL for several consumers
//	router.AddMiddleware(
//		middleware.Recoverer,
//		dedupewatermill.Middleware(d, dedupewatermill.Config{}), // keyed by message UUID
//	)
//
// # Verdicts
//
// The handler's result decides as in [dedupe.Deduper.Do], and the router acks
// or nacks as Watermill does: nil marks the message processed and acks it; an
// error (or a panic) releases the claim and nacks it, so the subscriber
// delivers it again and it runs again; a duplicate is acked without running
// the handler; a copy that another handler is processing waits for that
// one's outcome (up to [DefaultWait]) and is nacked if it is still running.
// [Middleware] says how the messages a handler produces are kept with the
// mark and published again for a duplicate.
//
// # Unlike Watermill's Deduplicator
//
// Watermill has a deduplicator of its own (middleware.Deduplicator, in
// message/router/middleware/deduplicator.go). Its repository's IsDuplicate
// records a message's key when it first sees it, before the handler runs. So:
//
//   - A handler that fails, or a process that dies while it runs, leaves the
//     key recorded: the broker's redelivery is dropped as a duplicate and the
//     message is never processed. Here the key is claimed, with a lease,
//     before the handler runs and marked only after it succeeded; a failure
//     releases the claim and a crash lets the lease run out, so the
//     redelivery runs.
//   - A copy that arrives while the first is still running is dropped at
//     once, even if the first then fails. Here it waits for the first one's
//     outcome and runs if that one failed.
//   - Its default key is an Adler-32 checksum of the payload (two different
//     messages may collide, and two messages with one payload are one); its
//     default repository is a map in the process, for one minute, which
//     other consumers do not see. Here the key is the message's UUID (or a
//     metadata field, or a function of yours) and the store is any
//     [dedupe.Store]: Redis or PostgreSQL for consumers in several
//     processes, with a TTL that outlasts the broker's redeliveries.
//   - A message whose produced messages the router failed to publish is
//     nacked and redelivered; here the redelivery publishes the kept
//     messages again instead of dropping them (see [Middleware]).
//
// # Batches
//
// A Watermill handler gets one message at a time: the router takes each
// message from the subscriber's channel and acks or nacks it on its own. So
// [dedupe.Deduper.DoEach], which claims and marks many keys in one round
// trip each, has no batch to work on here, and each message costs its own
// claim and mark. A consumer that takes a batch from its broker itself (a
// Redis stream read with XREADGROUP COUNT 64, a poller) runs it through
// DoEach: the batchconsumer example of this repository does.
//
// This package is a module of its own,
// github.com/gatewaykit/dedupe/contrib/dedupewatermill, so that only its
// users download Watermill.
package dedupewatermill
