package deduperedis

import (
	"context"
	"errors"
	"fmt"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/queue"
	"github.com/redis/go-redis/v9"
)

// Count returns the live messages (the entries of the stream, from which
// settled ones are deleted) and the failed ones kept; see [queue.Queue].
func (q *Queue) Count(ctx context.Context) (queue.Counts, error) {
	if err := q.check(ctx); err != nil {
		return queue.Counts{}, err
	}
	res, err := countScript.Run(ctx, q.client, []string{q.stream, q.failedKey()}, q.cfg.Retention.Milliseconds()).Slice()
	if err != nil {
		return queue.Counts{}, queueErr("count", err)
	}
	if len(res) != 2 {
		return queue.Counts{}, queueErr("count", fmt.Errorf("unexpected reply %v", res))
	}
	live, _ := res[0].(int64)
	failed, _ := res[1].(int64)
	return queue.Counts{Live: int(live), Failed: int(failed)}, nil
}

// Failed returns the latest failed messages; see [queue.Queue].
func (q *Queue) Failed(ctx context.Context, limit int) ([]queue.Entry, error) {
	if err := q.check(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = queue.DefaultFailedLimit
	}
	ids, err := failedScript.Run(ctx, q.client, []string{q.failedKey()}, q.cfg.Retention.Milliseconds(), limit).StringSlice()
	if err != nil {
		return nil, queueErr("failed", err)
	}
	cmds := make([]*redis.SliceCmd, len(ids))
	_, err = q.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HMGet(ctx, q.statusKey(id), entryFields...)
		}
		return nil
	})
	if err != nil {
		return nil, queueErr("failed", err)
	}
	out := make([]queue.Entry, 0, len(ids))
	for i, id := range ids {
		e, ok, err := parseEntry(id, cmds[i].Val())
		if err != nil {
			return nil, queueErr("failed", err)
		}
		if ok && e.State == queue.StateFailed { // else expired meanwhile
			out = append(out, e)
		}
	}
	return out, nil
}

// Requeue puts the failed message with id back in the stream; see
// [queue.Queue].
func (q *Queue) Requeue(ctx context.Context, id string) (bool, error) {
	if err := q.check(ctx); err != nil {
		return false, err
	}
	key, err := q.client.HGet(ctx, q.statusKey(id), "key").Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, queueErr("requeue", err)
	}
	k, err := dedupe.ParseKey(key)
	if err != nil {
		return false, queueErr("requeue", err)
	}
	n, err := requeueScript.Run(ctx, q.client, []string{q.stream, q.statusKey(id), q.liveKey(k), q.failedKey()},
		id, key).Int64()
	if err != nil {
		return false, queueErr("requeue", err)
	}
	return n == 1, nil
}

// Lua scripts of the dead letters.
var (
	// countScript forgets the failed messages of the sorted set KEYS[2]
	// older than ARGV[1] ms and returns {entries of stream KEYS[1], failed}.
	countScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[1]))
return {redis.call('XLEN', KEYS[1]), redis.call('ZCARD', KEYS[2])}
`)

	// failedScript forgets the failed messages of the sorted set KEYS[1]
	// older than ARGV[1] ms and returns the ids of the latest ARGV[2].
	failedScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]))
return redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
`)

	// requeueScript puts the failed message ARGV[1] (state hash KEYS[2], key
	// ARGV[2], live key KEYS[3]) back in stream KEYS[1] with its kept data,
	// unless its key is live again; it drops it from the sorted set KEYS[4]
	// of failed messages. It returns 1 if it requeued it, else 0.
	requeueScript = redis.NewScript(`
local st = redis.call('HMGET', KEYS[2], 'state', 'key', 'data')
if tonumber(st[1]) ~= 4 or st[2] ~= ARGV[2] or not st[3] then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local eid = redis.call('XADD', KEYS[1], '*', 'id', ARGV[1], 'data', st[3])
redis.call('SET', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[2], 'state', 1, 'attempts', 0, 'updated', now, 'entry', eid)
redis.call('HDEL', KEYS[2], 'reason', 'data', 'receipt')
redis.call('PERSIST', KEYS[2])
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
`)
)
