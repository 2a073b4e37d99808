package queue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/queue"
)

// A worker of its own pushes a message, takes it, and settles it as done; a
// copy pushed while the message is live is not added. (The Async of package
// dedupehttp does this for a gateway.)
func Example() {
	q := queue.NewMemory(queue.MemoryConfig{})
	defer q.Close()
	ctx := context.Background()

	m := queue.Message{ID: "q1", Key: dedupe.Key{Channel: "telegram", MessageID: "42"},
		Method: "POST", Target: "/telegram", Body: []byte(`{"update_id":42}`)}
	id, added, err := q.Push(ctx, m)
	if err != nil {
		panic(err)
	}
	fmt.Println("pushed", id, added)
	copy1 := m
	copy1.ID = "q2" // a redelivery of the same message
	id, added, _ = q.Push(ctx, copy1)
	fmt.Println("copy", id, added)

	d, err := q.Take(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("took %s, attempt %d: %s\n", d.ID, d.Attempt, d.Body)
	if err := q.Update(ctx, d, queue.Change{State: queue.StateDone}); err != nil {
		panic(err)
	}
	e, _, _ := q.Status(ctx, "q1")
	fmt.Println(e.State)
	// Output:
	// pushed q1 true
	// copy q1 false
	// took q1, attempt 1: {"update_id":42}
	// done
}

// A message that failed for good is a dead letter: the queue keeps it, with
// its reason and its request, for the retention. An operator lists them and
// puts one back once its cause is fixed.
func ExampleSQLite_Failed() {
	dir, err := os.MkdirTemp("", "queue-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	q, err := queue.OpenSQLite(filepath.Join(dir, "queue.db"), queue.SQLiteConfig{})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	ctx := context.Background()

	m := queue.Message{ID: "q1", Key: dedupe.Key{Channel: "telegram", MessageID: "42"},
		Method: "POST", Target: "/telegram", Body: []byte(`{"update_id":42}`)}
	if _, _, err := q.Push(ctx, m); err != nil {
		panic(err)
	}
	d, err := q.Take(ctx) // a worker takes it: attempt 1
	if err != nil {
		panic(err)
	}
	err = q.Update(ctx, d, queue.Change{State: queue.StateFailed, Reason: "handler failed: status 500"})
	if err != nil {
		panic(err)
	}

	counts, _ := q.Count(ctx)
	fmt.Printf("live %d, failed %d\n", counts.Live, counts.Failed)
	dead, _ := q.Failed(ctx, 10)
	for _, e := range dead {
		fmt.Printf("%s %s after %d attempt(s): %s\n", e.ID, e.Key, e.Attempts, e.Reason)
	}
	ok, _ := q.Requeue(ctx, "q1")
	d, _ = q.Take(ctx)
	fmt.Println(ok, d.ID, d.Attempt, string(d.Body))
	// Output:
	// live 0, failed 1
	// q1 telegram:42 after 1 attempt(s): handler failed: status 500
	// true q1 1 {"update_id":42}
}
