// Package queue is the durable work queue of a webhook gateway: the [Queue]
// contract, and the queues of this module, [Memory] (in the process) and
// [SQLite] (in a file, for the processes of one host). The deduperedis and
// postgres modules hold the Redis Streams and PostgreSQL queues, which are
// built on this package; package queue/queuetest holds the conformance suite
// and the crash tests every durable queue passes.
//
// A queue stores [Message] values (an accepted request: its key, method,
// target, headers and body) and hands each out as a [Delivery] to one worker
// at a time; [Entry] is what the queue tells of a message by its id. The
// consumer is the Async of package dedupehttp, which answers 202 Accepted
// only once Push returned and runs the handler under a [dedupe.Deduper]; a
// queue is usable alone, by any worker that follows the [Queue] contract.
//
// This package imports no HTTP middleware: a store module builds its queue
// on it without depending on package dedupehttp.
package queue
