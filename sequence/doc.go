// Package sequence hands on messages in the order of their per-key sequence
// numbers, for flows where order matters: a cancel must not overtake the
// payment it cancels, an edit the message it edits. Deduplication (package
// dedupe) makes each message processed once; a [Sequencer] makes the messages
// of one key processed in order.
//
//	s := sequence.New[Update](sequence.Config{})
//	ready, verdict := s.Push(chatID, update.Seq, update)
//	for _, it := range ready {
//		process(it.Value) // it.Skipped > 0: numbers were given up before it
//	}
//
// ExampleSequencer, in example_test.go, runs this, compiled and checked by
// go test.
//
// # Keys and numbers
//
// A key is any string naming one ordered stream, a chat or an order, say;
// each value pushed carries its number within the key. The first value of a
// key starts its sequence, unless [Config].FirstSeq names the first number.
// From then on the Sequencer expects the number after the last one it handed
// on.
//
// # Verdicts
//
// [Sequencer.Push] says what it did with each value: [Ready], handed on with
// any buffered values that now follow; [Buffered], waiting for the numbers
// before it; [Stale], below the last number handed on, dropped; [Duplicate],
// handed on or buffered already, dropped. Nothing is lost silently.
//
// # Gaps
//
// A gap is not waited for forever. It is given up, and the values after it
// handed on with [Item.Skipped] counting the missing numbers, when a value
// after it has waited [Config].Timeout, when the key holds more than
// [Config].MaxBuffered values, or at once when more than [Config].MaxGap
// numbers are missing (the sender restarted its numbering, say).
//
// # Time and goroutines
//
// A Sequencer starts no goroutine and needs no Close. It reads the clock
// ([Config].Now) only while a key has buffered values, and checks timeouts when
// the key is pushed and when [Sequencer.Expire] is called: call Expire
// periodically, and [Sequencer.Flush] at shutdown.
//
// # Workers
//
// A Sequencer is safe for concurrent use, but order is a promise per consumer.
// Route each key to one worker with [Shard], a consistent hash that is the
// same in every process and release, and give each worker its own Sequencer.
//
// # Memory
//
// At most [Config].MaxKeys keys are tracked, each holding at most
// [Config].MaxBuffered values; the least recently used key with nothing
// buffered is forgotten first.
package sequence
