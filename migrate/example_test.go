package migrate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/migrate"
)

// Copy the marks of one store to another, as a gateway moving from one
// process's memory to a shared store would. Any store of this repository can
// be either end: a SQLite file (NekoBot's included), Redis, PostgreSQL.
func ExampleCopy() {
	ctx := context.Background()
	from := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	defer from.Close()
	to := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	defer to.Close()
	for _, id := range []string{"1", "2", "3"} {
		_ = from.Mark(ctx, dedupe.Key{Channel: "telegram", MessageID: id}, time.Hour)
	}
	_ = to.Mark(ctx, dedupe.Key{Channel: "telegram", MessageID: "2"}, time.Hour)

	sum, err := migrate.Copy(ctx, from, to, migrate.Options{
		Checkpoint: func(cp migrate.Checkpoint) error {
			return nil // save cp to resume an interrupted copy with Options.Resume
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("copied %d, already present %d, expired %d\n", sum.Copied, sum.Present, sum.Expired)
	ok, _ := to.Exists(ctx, dedupe.Key{Channel: "telegram", MessageID: "3"})
	fmt.Println("telegram:3 exists:", ok)
	// Output:
	// copied 2, already present 1, expired 0
	// telegram:3 exists: true
}

// Count what a store holds, as "dedupe stats" prints it.
func ExampleStats() {
	ctx := context.Background()
	s := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	defer s.Close()
	_ = s.Mark(ctx, dedupe.Key{Channel: "qq", MessageID: "1"}, time.Hour)
	_ = s.Mark(ctx, dedupe.Key{Channel: "qq", MessageID: "2"}, 2*time.Hour)
	_, _ = s.Claim(ctx, dedupe.NewClaim(dedupe.Key{Channel: "qq", MessageID: "3"}), time.Minute)

	st, err := migrate.Stats(ctx, s)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %d live marks, %d live claims, the last expiring in about %v\n",
		st.Backend, st.Marks, st.Claims, time.Until(st.Newest).Round(time.Hour))
	// Output:
	// memory: 2 live marks, 1 live claims, the last expiring in about 2h0m0s
}
