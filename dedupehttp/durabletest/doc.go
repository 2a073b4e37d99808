// Package durabletest holds the crash tests of durable acceptance: a gateway
// that answers 202 with [dedupehttp.Async] over a [queue.Queue], killed with
// SIGKILL mid-handler ([Kill]) or by a message that kills every process that
// runs it ([Poison]). Every durable queue of this repository passes them; a
// third-party queue should too:
//
//	func TestQueueKill(t *testing.T) {
//		durabletest.Kill(t, durabletest.KillConfig{
//			Open: func(t *testing.T, name, dir string) (queue.Queue, dedupe.Store) {
//				return myqueue.Open(name), mystore.Open(name)
//			},
//		})
//	}
//
// The tests sit above both the middleware and the queue: [queue/queuetest],
// the queue's own conformance suite, imports neither this package nor
// package dedupehttp.
package durabletest
