package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// BenchmarkConsume consumes a Redis stream in takes of 64 entries, each a
// new message: "each" runs a take through Deduper.DoEach (Step), the
// baseline "do" runs the same take with one Deduper.Do per entry, in
// order, with the same XREADGROUP and XACK. One op is one take of 64.
func BenchmarkConsume(b *testing.B) {
	url := redisURL(b)
	opt, err := redis.ParseURL(url)
	require.NoError(b, err)
	client := redis.NewClient(opt)
	defer client.Close()
	stores := map[string]func(b *testing.B, name string) dedupe.Store{
		"sqlite": func(b *testing.B, _ string) dedupe.Store {
			s, err := dedupe.OpenSQLite(filepath.Join(b.TempDir(), "marks.db"), dedupe.SQLiteConfig{})
			require.NoError(b, err)
			return s
		},
		"redis": func(b *testing.B, name string) dedupe.Store {
			s, err := deduperedis.New(client, deduperedis.Config{Prefix: name + ":"})
			require.NoError(b, err)
			b.Cleanup(func() {
				for it := client.Scan(context.Background(), 0, name+":*", 1000).Iterator(); it.Next(context.Background()); {
					client.Del(context.Background(), it.Val())
				}
			})
			return s
		},
	}
	for _, store := range []string{"sqlite", "redis"} {
		for _, mode := range []string{"each", "do"} {
			b.Run(store+"/"+mode, func(b *testing.B) {
				name := fmt.Sprintf("batchconsumer-bench-%d", time.Now().UnixNano())
				st := stores[store](b, name)
				defer st.Close()
				d := dedupe.New(st)
				defer d.Close()
				c := &Consumer{Client: client, Stream: "{" + name + "}:s", Group: "g", Name: "c", Deduper: d, Channel: "bench",
					Batch: 64, Block: 10 * time.Millisecond, Retry: time.Hour,
					Handle: func(context.Context, Message) error { return nil }}
				defer client.Del(context.Background(), c.Stream)
				require.NoError(b, c.CreateGroup(context.Background()))
				fill(b, client, c.Stream, b.N*64)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					var n int
					if mode == "each" {
						o, err := c.Step(context.Background())
						require.NoError(b, err)
						n = o.Processed
					} else {
						n = stepPerKey(b, c)
					}
					if n != 64 {
						b.Fatalf("processed %d of a take of 64", n)
					}
				}
			})
		}
	}
}

// stepPerKey is Step with one Deduper.Do per entry: the baseline.
func stepPerKey(b *testing.B, c *Consumer) int {
	ctx := context.Background()
	entries, _, err := c.take(ctx)
	require.NoError(b, err)
	var ack []string
	for _, e := range entries {
		m := Message{EntryID: e.ID, ID: e.Values["id"].(string)}
		err := c.Deduper.Do(ctx, dedupe.Key{Channel: c.Channel, MessageID: m.ID}, func(ctx context.Context) error { return c.Handle(ctx, m) })
		if err == nil || errors.Is(err, dedupe.ErrDuplicate) {
			ack = append(ack, e.ID)
		}
	}
	require.NoError(b, c.settle(ctx, entries, ack, nil))
	return len(ack)
}

func fill(b *testing.B, client *redis.Client, stream string, n int) {
	ctx := context.Background()
	for start := 0; start < n; start += 1000 {
		p := client.Pipeline()
		for i := start; i < min(n, start+1000); i++ {
			p.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"id": fmt.Sprint("m-", i)}})
		}
		_, err := p.Exec(ctx)
		require.NoError(b, err)
	}
}
