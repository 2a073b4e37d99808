package deduperedis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe/queue"

	"github.com/gatewaykit/dedupe"
	"github.com/redis/go-redis/v9"
)

// Update moves d on as c says; see [queue.Queue]. A pending entry is
// hidden by its idle time: to keep it hidden for After, or to make it
// visible after After, the script sets its idle time to the visibility
// timeout minus After, so After is capped at the visibility timeout.
func (q *Queue) Update(ctx context.Context, d queue.Delivery, c queue.Change) error {
	if err := q.check(ctx); err != nil {
		return err
	}
	vis := q.cfg.Visibility
	var op string
	var hidden time.Duration // how long the entry stays hidden from now
	switch c.State {
	case queue.StateProcessing:
		op, hidden = "extend", vis
		if c.After > 0 {
			hidden = min(c.After, vis)
		}
	case queue.StateQueued:
		op, hidden = "requeue", min(max(c.After, 0), vis)
	case queue.StateFailed:
		op = "fail"
	case queue.StateDone:
		op = "done"
	default:
		return fmt.Errorf("dedupe: redis queue: update to state %d", c.State)
	}
	uncount := 0
	if c.NotRun && c.State == queue.StateQueued {
		uncount = 1
	}
	eid, _, _ := strings.Cut(d.Receipt, "/") // the stream entry the take read
	n, err := updateScript.Run(ctx, q.client, []string{q.stream, q.statusKey(d.ID), q.liveKey(d.Key), q.failedKey()},
		q.cfg.Group, q.cfg.Consumer, op, d.Receipt, (vis - hidden).Milliseconds(), q.cfg.Retention.Milliseconds(),
		d.ID, eid, c.Reason, uncount).Int64()
	switch {
	case err != nil:
		return queueErr("update", err)
	case n == 0 && c.State != queue.StateDone:
		return fmt.Errorf("%w: %s", queue.ErrStaleDelivery, d.ID)
	}
	return nil
}

// Status returns the state of the message with id; see [queue.Queue].
func (q *Queue) Status(ctx context.Context, id string) (queue.Entry, bool, error) {
	if err := q.check(ctx); err != nil {
		return queue.Entry{}, false, err
	}
	v, err := q.client.HMGet(ctx, q.statusKey(id), entryFields...).Result()
	if err != nil {
		return queue.Entry{}, false, queueErr("status", err)
	}
	e, ok, err := parseEntry(id, v)
	if err != nil {
		return queue.Entry{}, false, queueErr("status", err)
	}
	return e, ok, nil
}

// entryFields are the fields of a state hash that parseEntry reads.
var entryFields = []string{"key", "state", "attempts", "accepted", "updated", "reason"}

// parseEntry returns the entry of id from the values of entryFields; ok is
// false if the hash is gone.
func parseEntry(id string, v []any) (queue.Entry, bool, error) {
	if v[0] == nil {
		return queue.Entry{}, false, nil
	}
	k, err := dedupe.ParseKey(fmt.Sprint(v[0]))
	if err != nil {
		return queue.Entry{}, false, err
	}
	num := func(x any) int64 {
		n, _ := strconv.ParseInt(fmt.Sprint(x), 10, 64)
		return n
	}
	reason, _ := v[5].(string)
	return queue.Entry{ID: id, Key: k, State: queue.State(num(v[1])), Attempts: int(num(v[2])),
		Accepted: time.UnixMilli(num(v[3])), Updated: time.UnixMilli(num(v[4])), Reason: reason}, true, nil
}

// Close makes every later call fail with [queue.ErrClosed]; a
// Take waiting in XREADGROUP sees it within the poll interval. It removes
// this process's consumer from the group if no entry is pending for it
// (entries pending for a consumer that is gone are taken over by the others
// after their timeout all the same). The stream stays. Close leaves the
// client open, and may be called more than once.
func (q *Queue) Close() error {
	q.closeOnce.Do(func() {
		close(q.done)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = dropConsumerScript.Run(ctx, q.client, []string{q.stream}, q.cfg.Group, q.cfg.Consumer).Err()
	})
	return nil
}

// Lua scripts of the queue. Times are the server's, in milliseconds; states
// are the numbers of [queue.State] (1 queued, 2 processing, 3 done, 4
// failed).
var (
	// pushScript adds a message unless KEYS[2] names a live one: it returns
	// {1, id} when it added ARGV[1], and {0, id of the live one} otherwise.
	// With a bound ARGV[4] > 0 it refuses a new message, with the error
	// DEDUPE_FULL, when the stream holds that many entries.
	pushScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[2])
if cur then return {0, cur} end
local bound = tonumber(ARGV[4])
if bound > 0 and redis.call('XLEN', KEYS[1]) >= bound then return redis.error_reply('DEDUPE_FULL queue full') end
if redis.call('EXISTS', KEYS[3]) == 1 then return redis.error_reply('queue id ' .. ARGV[1] .. ' is not new') end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local eid = redis.call('XADD', KEYS[1], '*', 'id', ARGV[1], 'data', ARGV[3])
redis.call('SET', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], 'key', ARGV[2], 'state', 1, 'attempts', 0, 'accepted', now, 'updated', now, 'entry', eid)
return {1, ARGV[1]}
`)

	// takeScript takes, for consumer ARGV[2] of group ARGV[1], an entry
	// pending for longer than ARGV[3] ms (XAUTOCLAIM from cursor ARGV[4],
	// ten tries at most), or else a new one, and records the take with
	// receipt "<entry id>/ARGV[5]" in the state hash (ARGV[6] .. id). It
	// returns {next cursor, receipt, data, attempts}, or {next cursor} if
	// there is none. It keeps the message id and entry id it took under
	// KEYS[2] for ARGV[3] ms: run again with the same ARGV[5] (the client
	// sent it again after a lost reply), it hands out that take again, as it
	// was, while the state hash still holds its receipt.
	takeScript = redis.NewScript(`
local prev = redis.call('GET', KEYS[2])
if prev then
	local id, eid = string.match(prev, '^(.*) (%S+)$')
	local s, receipt = ARGV[6] .. id, eid .. '/' .. ARGV[5]
	local st = redis.call('HMGET', s, 'receipt', 'attempts')
	local e = redis.call('XRANGE', KEYS[1], eid, eid)
	if st[1] == receipt and e[1] then
		for i = 1, #e[1][2], 2 do
			if e[1][2][i] == 'data' then return {ARGV[4], receipt, e[1][2][i + 1], tonumber(st[2])} end
		end
	end
	return {ARGV[4]}
end
local cursor, entry = ARGV[4], nil
for i = 1, 10 do
	local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], cursor, 'COUNT', 1)
	cursor = r[1]
	if r[2][1] then entry = r[2][1] break end
	if cursor == '0-0' then break end
end
if not entry then
	local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', 1, 'STREAMS', KEYS[1], '>')
	if r and r[1][2][1] then entry = r[1][2][1] end
end
if not entry then return {cursor} end
local id, data
for i = 1, #entry[2], 2 do
	if entry[2][i] == 'id' then id = entry[2][i + 1] elseif entry[2][i] == 'data' then data = entry[2][i + 1] end
end
local s, receipt = ARGV[6] .. id, entry[1] .. '/' .. ARGV[5]
local t = redis.call('TIME')
local attempts = redis.call('HINCRBY', s, 'attempts', 1)
redis.call('HSET', s, 'state', 2, 'receipt', receipt, 'updated', t[1] * 1000 + math.floor(t[2] / 1000))
redis.call('SET', KEYS[2], id .. ' ' .. entry[1], 'PX', ARGV[3])
return {cursor, receipt, data, attempts}
`)

	// takenScript records in the state hash KEYS[1] a take, with receipt
	// ARGV[1], of an entry read by a blocking XREADGROUP. It returns the
	// attempts. Run again (the client sent it again after a lost reply), it
	// finds its receipt recorded and counts nothing more.
	takenScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'receipt') == ARGV[1] then
	return tonumber(redis.call('HGET', KEYS[1], 'attempts'))
end
local t = redis.call('TIME')
local attempts = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HSET', KEYS[1], 'state', 2, 'receipt', ARGV[1], 'updated', t[1] * 1000 + math.floor(t[2] / 1000))
return attempts
`)

	// updateScript applies ARGV[3] ("extend", "requeue", "fail" or "done")
	// to message ARGV[7], whose state hash is KEYS[2] and live key KEYS[3],
	// in stream KEYS[1] and group ARGV[1]. All but "done" require that the
	// message is processing with receipt ARGV[4]. "extend" and "requeue"
	// give the pending entry the idle time ARGV[5] ms, and "requeue" takes
	// ARGV[10] (0 or 1) off the attempts. "fail" and "done" acknowledge and
	// delete the entry, free the live key and let the state expire after
	// ARGV[6] ms; "fail" keeps the entry's data and the reason ARGV[9] in
	// the state and indexes the message in the sorted set KEYS[4] by time.
	// It returns 1 if it applied the update, else 0. A message whose state
	// is gone (a server that evicts keys) is still acknowledged by "done",
	// with the entry id ARGV[8] from its receipt.
	updateScript = redis.NewScript(`
local st = redis.call('HMGET', KEYS[2], 'state', 'receipt', 'entry')
local state, eid = tonumber(st[1]), st[3]
local op = ARGV[3]
if not state then
	if op ~= 'done' or ARGV[8] == '' then return 0 end
	redis.call('XACK', KEYS[1], ARGV[1], ARGV[8])
	redis.call('XDEL', KEYS[1], ARGV[8])
	if redis.call('GET', KEYS[3]) == ARGV[7] then redis.call('DEL', KEYS[3]) end
	return 1
end
if op == 'done' then
	if state == 3 then return 1 end
elseif state ~= 2 or st[2] ~= ARGV[4] then
	return 0
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if op == 'extend' or op == 'requeue' then
	redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, eid, 'IDLE', ARGV[5], 'JUSTID')
	if op == 'requeue' then
		redis.call('HSET', KEYS[2], 'state', 1, 'updated', now)
		if ARGV[10] == '1' then redis.call('HINCRBY', KEYS[2], 'attempts', -1) end
		redis.call('HDEL', KEYS[2], 'receipt')
	end
	return 1
end
if op == 'fail' then
	local e = redis.call('XRANGE', KEYS[1], eid, eid)
	for i = 1, e[1] and #e[1][2] or 0, 2 do
		if e[1][2][i] == 'data' then redis.call('HSET', KEYS[2], 'data', e[1][2][i + 1]) end
	end
	redis.call('HSET', KEYS[2], 'reason', ARGV[9])
	redis.call('ZADD', KEYS[4], now, ARGV[7])
else
	redis.call('HDEL', KEYS[2], 'data', 'reason')
	redis.call('ZREM', KEYS[4], ARGV[7])
end
if state < 3 then
	redis.call('XACK', KEYS[1], ARGV[1], eid)
	redis.call('XDEL', KEYS[1], eid)
	if redis.call('GET', KEYS[3]) == ARGV[7] then redis.call('DEL', KEYS[3]) end
end
redis.call('HSET', KEYS[2], 'state', op == 'done' and 3 or 4, 'updated', now)
redis.call('HDEL', KEYS[2], 'receipt')
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return 1
`)

	// dropConsumerScript deletes consumer ARGV[2] of group ARGV[1] of stream
	// KEYS[1] if no entry is pending for it.
	dropConsumerScript = redis.NewScript(`
local p = redis.pcall('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if type(p) == 'table' and not p.err and #p == 0 then
	redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
end
return 0
`)
)
