package replytest_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/gatewaykit/dedupe/reply/replytest"
)

// A reply to LINE whose first send the platform accepts and never answers:
// the Sender sends it again with the same X-Line-Retry-Key, LINE answers 409,
// and the chat holds the reply once.
func ExampleServer() {
	plat := replytest.New(replytest.Config{})
	if _, err := plat.Start(); err != nil {
		panic(err)
	}
	defer plat.Close()
	plat.Next(replytest.Hang) // the first call: accepted, no answer

	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	defer store.Close()
	sender := reply.New(store, reply.LINE, reply.WithLease(10*time.Second))
	send, err := replytest.Client{HTTP: &http.Client{Timeout: 200 * time.Millisecond}, BaseURL: plat.URL(), Auth: "bot"}.
		Send(replytest.LINE, "U123")
	if err != nil {
		panic(err)
	}
	key := dedupe.Key{Channel: "line", MessageID: "m1"}
	compose := func(context.Context) ([]byte, error) { return []byte("Hello!"), nil }
	ctx := context.Background()
	for {
		r, err := sender.Send(ctx, key, 0, compose, send)
		if err == nil {
			fmt.Println("sent after", r.Attempts, "attempts")
			break
		}
		fmt.Println("send failed; refused by the platform:", reply.IsNotSent(err))
	}
	fmt.Println("replies in the chat:", plat.Count("U123", "Hello!"))
	fmt.Println(plat.Stats())
	// Output:
	// send failed; refused by the platform: false
	// sent after 2 attempts
	// replies in the chat: 1
	// calls=2 delivered=1 repeats=1 restarts=0 faults=[hang=1]
}
