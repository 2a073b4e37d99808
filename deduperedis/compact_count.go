package deduperedis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// liveCount is what CountLive found: marks and claims, and the earliest and
// latest expiry of the marks on the local clock.
type liveCount struct {
	mu             sync.Mutex
	marks, claims  int64
	oldest, newest time.Time
}

// addMark counts a mark expiring at exp.
func (c *liveCount) addMark(exp time.Time) {
	c.marks++
	if c.oldest.IsZero() || exp.Before(c.oldest) {
		c.oldest = exp
	}
	if exp.After(c.newest) {
		c.newest = exp
	}
}

// countCompact is CountLive on the compact layout: it walks every key of the
// prefix on the server, or on each master of a cluster, with SCAN, and reads
// each page's claim keys (GET) and buckets (HGETALL) in one pipeline. The
// marks' expiries are on the gateways' clock, as the layout keeps them.
func (s *Store) countCompact(ctx context.Context) (marks, claims int64, oldest, newest time.Time, err error) {
	var c liveCount
	if s.cluster != nil {
		err = s.cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return s.countNode(ctx, node, &c)
		})
	} else {
		err = s.countNode(ctx, s.client, &c)
	}
	if err != nil {
		return 0, 0, time.Time{}, time.Time{}, fmt.Errorf("dedupe: redis: count: %w", err)
	}
	return c.marks, c.claims, c.oldest, c.newest, nil
}

// countNode adds what client holds under the prefix to c.
func (s *Store) countNode(ctx context.Context, client redis.Cmdable, c *liveCount) error {
	var cursor uint64
	for {
		keys, next, err := client.Scan(ctx, cursor, escapeGlob(s.prefix)+"*", 1000).Result()
		if err != nil {
			return err
		}
		if err := s.countPage(ctx, client, keys, c); err != nil {
			return err
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// countPage adds the claims and the live marks of keys to c.
func (s *Store) countPage(ctx context.Context, client redis.Cmdable, keys []string, c *liveCount) error {
	if len(keys) == 0 {
		return nil
	}
	cmds := make([]redis.Cmder, len(keys))
	_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			switch _, rest, _ := strings.Cut(k[len(s.prefix):], "}"); {
			case strings.HasPrefix(rest, "c:"):
				cmds[i] = p.Get(ctx, k)
			case rest == "m":
				cmds[i] = p.HGetAll(ctx, k)
			}
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return err
	}
	now := time.UnixMilli(s.nowMs())
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range keys {
		switch cmd := cmds[i].(type) {
		case *redis.StringCmd:
			if v, err := cmd.Result(); err == nil && strings.HasPrefix(v, "c:") {
				c.claims++
			}
		case *redis.MapStringStringCmd:
			for _, v := range cmd.Val() {
				ms, err := strconv.ParseInt(v, 10, 64)
				if exp := time.UnixMilli(ms); err == nil && exp.After(now) {
					c.addMark(exp)
				}
			}
		}
	}
	return nil
}
