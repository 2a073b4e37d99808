// Package queue is the durable work queue of a webhook gateway: the [Queue]
// contract, and the queues of this module, [Memory] (in the process) and
// [SQLite] (in a file, for the processes of one host).
//
// Open a queue with [OpenSQLite] (or [NewMemory]) and give it to the Async
// of package dedupehttp with dedupehttp.WithQueue: a message answered 202
// Accepted then survives a crash of the process (ExampleWithQueue in package
// dedupehttp is that gateway). A worker of your own pushes, takes and
// settles messages itself, as Example in example_test.go does:
//
//	q, err := queue.OpenSQLite("gateway.db", queue.SQLiteConfig{})
//	id, added, err := q.Push(ctx, msg) // added is false for a live copy of msg's key
//	d, err := q.Take(ctx)              // hidden from other takers for the visibility timeout
//	err = q.Update(ctx, d, queue.Change{State: queue.StateDone})
//
// A queue stores [Message] values (an accepted request: its key, method,
// target, headers and body) and hands each out as a [Delivery] to one worker
// at a time; [Entry] is what the queue tells of a message by its id. The
// deduperedis and postgres modules hold the Redis Streams and PostgreSQL
// queues, which are built on this package; package queue/queuetest holds the
// conformance suite every queue passes, and package dedupehttp/durabletest
// the crash tests every durable queue passes behind the middleware.
//
// This package imports no HTTP middleware: a store module builds its queue
// on it without depending on package dedupehttp.
package queue
