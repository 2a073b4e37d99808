package deduperedis

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatewaykit/dedupe"
)

// markUntilScript marks KEYS[1] for ARGV[1] milliseconds and returns 1,
// unless it holds a mark already (with or without a result): then it
// lengthens the mark's TTL to ARGV[1] if that is longer, never shortening
// it, keeps its result, and returns 0. A claim or a
// released key's fences are replaced by the mark, as Mark does.
var markUntilScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and (v == 'm' or string.sub(v, 1, 2) == 'm:') then
	local left = redis.call('PTTL', KEYS[1])
	if left >= 0 and left < tonumber(ARGV[1]) then
		redis.call('PEXPIRE', KEYS[1], ARGV[1])
	end
	return 0
end
redis.call('SET', KEYS[1], 'm', 'PX', ARGV[1])
return 1
`)

// MarkUntil marks each keys[i] until expires[i] (local clock), in one
// pipeline of script calls (split by master on a cluster), keeping a live
// mark's longer TTL and replacing claims, and returns how many keys had a
// live mark. It implements [dedupe.BulkMarker].
func (s *Store) MarkUntil(ctx context.Context, keys []dedupe.Key, expires []time.Time) (int, error) {
	if len(keys) != len(expires) {
		return 0, fmt.Errorf("dedupe: redis: mark until: %d keys, %d expiries", len(keys), len(expires))
	}
	for _, k := range keys {
		if err := s.check(ctx, "mark until", k); err != nil {
			return 0, err
		}
	}
	local := time.Now()
	results := make([]*redis.Cmd, len(keys))
	todo := make([]int, len(keys))
	for i := range todo {
		todo[i] = i
	}
	present := 0
	for attempt := 0; len(todo) > 0; attempt++ {
		_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range todo {
				results[i] = s.markUntilRun(pipe{Cmdable: p, ctx: ctx}, keys[i], ms(expires[i].Sub(local)))
			}
			return nil
		})
		var again []int
		for _, i := range todo {
			n, err := results[i].Int64()
			switch {
			case err != nil && isNoScript(err) && attempt == 0:
				again = append(again, i)
			case err != nil:
				return 0, fmt.Errorf("dedupe: redis: mark until %s: %w", keys[i], err)
			case n == 0:
				present++
			}
		}
		if len(again) > 0 {
			script := markUntilScript
			if s.compact {
				script = compactMarkScript
			}
			if err := s.loadScript(ctx, script); err != nil {
				return 0, fmt.Errorf("dedupe: redis: mark until: load script: %w", err)
			}
		} else if err != nil {
			return 0, fmt.Errorf("dedupe: redis: mark until: %w", err)
		}
		todo = again
	}
	return present, nil
}

// markUntilRun queues the MarkUntil script of key, for ttl ms, on p.
func (s *Store) markUntilRun(p pipe, key dedupe.Key, ttl int64) *redis.Cmd {
	if s.compact {
		return s.markCompactRun(p, key, markValue, ttl, true)
	}
	return p.run(markUntilScript, s.key(key), ttl)
}

// isNoScript reports whether err is Redis's NOSCRIPT: the server does not know
// the script's SHA.
func isNoScript(err error) bool {
	return strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// loadScript loads script on the server, or on every master of a cluster.
func (s *Store) loadScript(ctx context.Context, script *redis.Script) error {
	if s.cluster != nil {
		return s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return script.Load(ctx, c).Err()
		})
	}
	return script.Load(ctx, s.client).Err()
}

// CountLive walks every key of the store's prefix (SCAN, and one pipeline of
// GET and PTTL per page) and returns the numbers of live marks and claims
// and the earliest and latest expiry of the marks, on the local clock. It
// implements [dedupe.Counter]. On the compact layout it reads every bucket
// (HGETALL) and claim key of the prefix instead, one page of SCAN at a time.
func (s *Store) CountLive(ctx context.Context) (marks, claims int64, oldest, newest time.Time, err error) {
	if s.closed.Load() {
		return 0, 0, oldest, newest, dedupe.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, oldest, newest, fmt.Errorf("dedupe: redis: count: %w", err)
	}
	if err := s.layoutChecked(ctx); err != nil {
		return 0, 0, oldest, newest, fmt.Errorf("dedupe: redis: count: %w", err)
	}
	if s.compact {
		return s.countCompact(ctx)
	}
	cursor := ""
	for {
		next, found, err := s.scanPage(ctx, cursor, 1000)
		if err != nil {
			return 0, 0, time.Time{}, time.Time{}, fmt.Errorf("dedupe: redis: count: %w", err)
		}
		for _, f := range found {
			_, marked := parseMark(f.value)
			switch {
			case strings.HasPrefix(f.value, "c:"):
				claims++
			case marked:
				marks++
				exp := f.expires
				if exp.IsZero() {
					continue
				}
				if oldest.IsZero() || exp.Before(oldest) {
					oldest = exp
				}
				if exp.After(newest) {
					newest = exp
				}
			}
		}
		if next == "" {
			return marks, claims, oldest, newest, nil
		}
		cursor = next
	}
}
