package sequence_test

import (
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe/dedupetest"
	"github.com/gatewaykit/dedupe/sequence"
)

// A cancel overtook the payment it cancels: the Sequencer holds it until the
// payment arrives, then hands on both in order. A late copy of the payment is
// stale.
func ExampleSequencer() {
	s := sequence.New[string](sequence.Config{})

	for _, m := range []struct {
		seq  uint64
		text string
	}{{1, "order"}, {3, "cancel"}, {2, "pay"}, {2, "pay (retried)"}} {
		ready, verdict := s.Push("order-42", m.seq, m.text)
		fmt.Printf("push %d %-13s -> %v", m.seq, m.text, verdict)
		for _, r := range ready {
			fmt.Printf(", %s", r.Value)
		}
		fmt.Println()
	}
	// Output:
	// push 1 order         -> ready, order
	// push 3 cancel        -> buffered
	// push 2 pay           -> ready, pay, cancel
	// push 2 pay (retried) -> stale
}

// A number that never arrives is given up after the timeout, and the skip is
// reported with the first value handed on past it.
func ExampleSequencer_Expire() {
	clock := dedupetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	s := sequence.New[string](sequence.Config{
		Timeout: 500 * time.Millisecond,
		Now:     clock.Now,
	})
	s.Push("chat-7", 1, "hello")
	s.Push("chat-7", 3, "are you there?") // 2 is missing

	clock.Advance(200 * time.Millisecond)
	fmt.Println("after 200 ms:", len(s.Expire()), "ready")

	clock.Advance(300 * time.Millisecond)
	for _, r := range s.Expire() {
		fmt.Printf("after 500 ms: %d %q, skipped %d before it\n", r.Seq, r.Value, r.Skipped)
	}
	// Output:
	// after 200 ms: 0 ready
	// after 500 ms: 3 "are you there?", skipped 1 before it
}

// Shard routes every message of a conversation to the same worker, so that
// one worker sees them all, in the order they arrived.
func ExampleShard() {
	const workers = 4
	for _, chat := range []string{"chat-1", "chat-2", "chat-1"} {
		fmt.Println(chat, "-> worker", sequence.Shard(chat, workers))
	}
	// Output:
	// chat-1 -> worker 0
	// chat-2 -> worker 3
	// chat-1 -> worker 0
}
