package reply_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/reply"
)

// A gateway answers a LINE message once: the first Send composes the reply,
// records it and pushes it with its X-Line-Retry-Key; a Send of the same
// reply later (the platform redelivered the message, or the gateway
// restarted) finds it sent and does not push it again.
func ExampleSender_Send() {
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{}) // or SQLite, Redis, PostgreSQL
	defer store.Close()
	s := reply.New(store, reply.LINE)

	key := dedupe.Key{Channel: "line", MessageID: "468789577898262530"}
	compose := func(ctx context.Context) ([]byte, error) {
		return []byte(`{"type":"text","text":"Your order shipped."}`), nil // one model call
	}
	push := func(ctx context.Context, m reply.Message) (string, error) {
		// POST https://api.line.me/v2/bot/message/push with the header
		// X-Line-Retry-Key: m.Token; a 409 means accepted before: return nil.
		fmt.Printf("push %s (attempt %d, retry key %s)\n", m.Body, m.Attempt, m.Token)
		return "", nil
	}
	for range 2 {
		r, err := s.Send(context.Background(), key, 0, compose, push)
		fmt.Println("sent by this call:", r.Sent, err)
	}
	// Output:
	// push {"type":"text","text":"Your order shipped."} (attempt 1, retry key 28b2a7e6-8b28-8bc1-96fb-8a73a5cd2647)
	// sent by this call: true <nil>
	// sent by this call: false <nil>
}

// The outbox path on SQLite: the handler's effect, the message's mark and
// its replies' records commit in one transaction (DoTx with IntendTx), and
// Flush sends the replies after the commit. A process killed between the
// commit and the sends loses nothing: the redelivered message is a
// duplicate, and its Flush sends what was not sent.
func ExampleIntendTx() {
	dir, _ := os.MkdirTemp("", "reply-example")
	defer os.RemoveAll(dir)
	store, err := dedupe.OpenSQLite(filepath.Join(dir, "gateway.db"), dedupe.SQLiteConfig{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	s := reply.New(store, reply.Feishu)
	send := func(ctx context.Context, m reply.Message) (string, error) {
		// POST /open-apis/im/v1/messages with "uuid": m.Token
		fmt.Printf("send %q, uuid %s…\n", m.Body, m.Token[:8])
		return fmt.Sprintf("om_%d", m.Slot), nil
	}
	ctx := context.Background()
	key := dedupe.Key{Channel: "feishu", MessageID: "om_dc13264520392913993dd051dba21dcf"}

	handle := func(crash bool) {
		err := store.DoTx(ctx, key, func(ctx context.Context, tx *sql.Tx) error {
			// ... the handler's own writes through tx ...
			for slot, text := range []string{"Thinking…", "The answer is 42."} {
				if err := reply.IntendTx(ctx, s, tx, key, slot, []byte(text)); err != nil {
					return err
				}
			}
			return nil
		})
		switch {
		case errors.Is(err, dedupe.ErrDuplicate):
			fmt.Println("redelivered: flush")
		case err != nil:
			panic(err)
		case crash:
			fmt.Println("committed; the process dies before sending")
			return
		}
		rs, err := s.Flush(ctx, key, send)
		for _, r := range rs {
			fmt.Println("receipt:", r.ID, "sent now:", r.Sent)
		}
		if err != nil {
			panic(err)
		}
	}
	handle(true)  // the first delivery
	handle(false) // the platform's redelivery
	handle(false) // and another
	// Output:
	// committed; the process dies before sending
	// redelivered: flush
	// send "Thinking…", uuid 5a1d007d…
	// send "The answer is 42.", uuid 8b369610…
	// receipt: om_0 sent now: true
	// receipt: om_1 sent now: true
	// redelivered: flush
	// receipt: om_0 sent now: false
	// receipt: om_1 sent now: false
}
