package deduperedis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/redis/go-redis/v9"
)

// How a Store runs a batch ([dedupe.BatchStore]):
//
// A batch does not go through the store's batchers: its caller has gathered
// its items already. Its commands, the same as the one-key calls' (the claim,
// extend and release scripts, SET PX), are sent in one pipeline, on one
// connection, by the caller's goroutine, and each item reads its own reply:
// the commands are not a transaction, and a command that fails fails only
// its item. An EVALSHA answered NOSCRIPT is sent again by EVAL in a second
// pipeline, for the items that got it. With [Config.Replicas] set, a
// pipeline that holds a Mark or a Claim ends with one WAIT, which confirms
// every write before it on the connection. A batch of more than maxEach
// items is sent maxEach at a time, one pipeline after another.
//
// On a [*redis.ClusterClient] the items are grouped by the master that owns
// their key in the client's slot map (every command touches one key, so a
// key's claim, mark and result are one value in one slot), and each master's
// share goes to it in a pipeline of its own, concurrently. The items that
// fail the way a failover or a slot migration makes calls fail are grouped
// again and sent again, after the slot map is reloaded, for up to
// [Config.ClusterRetry] and within the context, as one-key calls are (see
// cluster.go); an item answered ASK goes through the ClusterClient's own
// pipeline, which follows the redirection, unless the store waits for
// replicas. An item is reported done only from its own command's reply.

// maxEach bounds the commands of one pipeline of a batch. Longer batches are
// split.
const maxEach = 1000

// eachOp is one operation of the store applied to the items of a batch.
type eachOp struct {
	name string // for errors: "claim", "mark", ...
	wait bool   // its writes wait for the replicas (Claim, Mark)
	// queue adds item i's command on the Redis key key to p.
	queue func(p pipe, i int, key string) redis.Cmder
	// read reads item i's outcome from its command once sent: a Redis or
	// network error, and whether the command wrote what the replicas must
	// confirm.
	read func(i int, cmd redis.Cmder) (written bool, err error)
}

// ClaimEach is [Store.Claim] for each claims[i], for lease (lease <= 0: the
// configured lease), in one pipeline of the claim script (one per master on
// a cluster); it implements [dedupe.BatchStore]. An item whose error is not
// nil may have taken its key, as a Claim that failed: claim again with the
// same claim, or release it.
func (s *Store) ClaimEach(ctx context.Context, claims []dedupe.Claim, lease time.Duration) ([]dedupe.Status, []error) {
	if lease <= 0 {
		lease = s.lease
	}
	px := ms(lease)
	keys, errs := make([]dedupe.Key, len(claims)), make([]error, len(claims))
	for i, c := range claims {
		keys[i], errs[i] = c.Key, c.Validate()
	}
	n := make([]int64, len(claims))
	s.each(ctx, keys, errs, eachOp{name: "claim", wait: true,
		queue: func(p pipe, i int, key string) redis.Cmder {
			return s.claimRun(p, claims[i], key, px)
		},
		read: func(i int, cmd redis.Cmder) (bool, error) {
			v, err := cmd.(*redis.Cmd).Int64()
			n[i] = v
			return err == nil && v == claimTaken, err
		},
	})
	statuses := make([]dedupe.Status, len(claims))
	for i, err := range errs {
		switch {
		case err != nil:
		case n[i] == claimTaken:
			statuses[i] = dedupe.Claimed
		case n[i] == claimMarked:
			statuses[i] = dedupe.Duplicate
		default:
			statuses[i] = dedupe.InFlight
		}
	}
	return statuses, errs
}

// ExtendEach is [Store.Extend] for each claims[i], for lease (lease <= 0:
// the configured lease), in one pipeline of the extend script (one per
// master on a cluster); it implements [dedupe.BatchStore].
func (s *Store) ExtendEach(ctx context.Context, claims []dedupe.Claim, lease time.Duration) []error {
	if lease <= 0 {
		lease = s.lease
	}
	return s.updateEach(ctx, "extend", extendScript, claims, ms(lease))
}

// ReleaseEach is [Store.Release] for each claims[i], fencing each token, in
// one pipeline of the release script (one per master on a cluster); it
// implements [dedupe.BatchStore].
func (s *Store) ReleaseEach(ctx context.Context, claims []dedupe.Claim) []error {
	return s.updateEach(ctx, "release", releaseScript, claims, ms(s.lease))
}

// updateEach is update for each claims[i]: script on its key with its token
// and arg, a result other than 1 being [dedupe.ErrNotOwner].
func (s *Store) updateEach(ctx context.Context, op string, script *redis.Script, claims []dedupe.Claim, arg int64) []error {
	keys, errs := make([]dedupe.Key, len(claims)), make([]error, len(claims))
	for i, c := range claims {
		keys[i] = c.Key
		if errs[i] = c.Key.Validate(); errs[i] == nil && c.Validate() != nil {
			errs[i] = fmt.Errorf("dedupe: redis: %s %s: %w: not a claim token", op, c.Key, dedupe.ErrNotOwner)
		}
	}
	n := make([]int64, len(claims))
	s.each(ctx, keys, errs, eachOp{name: op,
		queue: func(p pipe, i int, key string) redis.Cmder {
			return p.run(script, key, claims[i].Token, arg)
		},
		read: func(i int, cmd redis.Cmder) (bool, error) {
			v, err := cmd.(*redis.Cmd).Int64()
			n[i] = v
			return false, err
		},
	})
	for i, err := range errs {
		if err == nil && n[i] != 1 {
			errs[i] = fmt.Errorf("dedupe: redis: %s %s: %w", op, keys[i], dedupe.ErrNotOwner)
		}
	}
	return errs
}

// MarkEach is [Store.MarkResult] for each keys[i] with results[i], for ttl
// (ttl <= 0: the configured TTL), and [Store.Mark] where results is nil or
// results[i] is empty, in one pipeline of SET PX (one per master on a
// cluster); it implements [dedupe.BatchStore]. If results is neither nil nor
// as long as keys, every item is refused with [dedupe.ErrInvalidKey]. The
// store keeps no reference to results once MarkEach returned.
func (s *Store) MarkEach(ctx context.Context, keys []dedupe.Key, results [][]byte, ttl time.Duration) []error {
	errs := make([]error, len(keys))
	if results != nil && len(results) != len(keys) {
		for i := range errs {
			errs[i] = fmt.Errorf("dedupe: redis: mark: %d results for %d keys: %w", len(results), len(keys), dedupe.ErrInvalidKey)
		}
		return errs
	}
	values := make([]any, len(keys))
	for i, k := range keys {
		values[i] = markValue
		switch errs[i] = k.Validate(); {
		case errs[i] != nil:
		case results == nil || len(results[i]) == 0:
		case len(results[i]) > dedupe.MaxResultSize:
			errs[i] = fmt.Errorf("dedupe: redis: mark %s: result of %d bytes, over %d: %w",
				k, len(results[i]), dedupe.MaxResultSize, dedupe.ErrTooLarge)
		default:
			values[i] = append([]byte(resultPrefix), results[i]...)
		}
	}
	if ttl <= 0 {
		ttl = s.ttl
	}
	px := roundMs(ttl)
	s.each(ctx, keys, errs, eachOp{name: "mark", wait: true,
		queue: func(p pipe, i int, key string) redis.Cmder {
			if s.compact {
				return s.markCompactRun(p, keys[i], values[i], ms(ttl), false)
			}
			return p.Set(p.ctx, key, values[i], px)
		},
		read: func(_ int, cmd redis.Cmder) (bool, error) { return true, cmd.Err() },
	})
	return errs
}

// each runs op on the items of keys whose errs[i] is nil, and sets errs[i]
// to the error of each: [dedupe.ErrClosed] for all if the store is closed,
// the context's error for all if it ended, and otherwise the wrapped error
// of its command, or nil.
func (s *Store) each(ctx context.Context, keys []dedupe.Key, errs []error, op eachOp) {
	s.batches.RLock()
	defer s.batches.RUnlock()
	if s.layoutEach(ctx, op.name, keys, errs) {
		return
	}
	todo := make([]int, 0, len(keys))
	rkeys := make([]string, len(keys))
	for i, k := range keys {
		switch {
		case s.closed.Load():
			errs[i] = dedupe.ErrClosed
		case ctx.Err() != nil:
			errs[i] = fmt.Errorf("dedupe: redis: %s %s: %w", op.name, k, ctx.Err())
		case errs[i] == nil:
			todo = append(todo, i)
			rkeys[i] = s.key(k)
		}
	}
	if len(todo) == 0 {
		return
	}
	if s.cluster != nil {
		s.eachCluster(ctx, op, rkeys, todo, errs)
	} else {
		s.sendEach(ctx, s.client, op, rkeys, todo, errs)
	}
	for _, i := range todo {
		if errs[i] != nil {
			errs[i] = s.fail(ctx, op.name, keys[i], errs[i])
		}
	}
}

// sendEach sends the items idx to client, maxEach per pipeline, one
// pipeline after another, and sets the error of each.
func (s *Store) sendEach(ctx context.Context, client redis.Cmdable, op eachOp, rkeys []string, idx []int, errs []error) {
	for len(idx) > 0 {
		n := min(len(idx), maxEach)
		if again := s.execEach(ctx, client, op, rkeys, idx[:n], errs, false); len(again) > 0 {
			s.execEach(ctx, client, op, rkeys, again, errs, true)
		}
		idx = idx[n:]
	}
}

// execEach sends the items idx to client in one pipeline, by EVAL if eval is
// set, and sets the error of each, but for the items answered NOSCRIPT
// unless eval is set: those it returns.
func (s *Store) execEach(ctx context.Context, client redis.Cmdable, op eachOp, rkeys []string, idx []int, errs []error, eval bool) (again []int) {
	pl := client.Pipeline()
	p := pipe{Cmdable: pl, ctx: ctx, eval: eval}
	confirmed := p.need() // nil check: no acks
	if s.replicas > 0 && op.wait {
		p.acks = &acks{replicas: s.replicas, timeout: s.replicaTimeout}
		confirmed = p.need()
	}
	cmds := make([]redis.Cmder, len(idx))
	for j, i := range idx {
		cmds[j] = op.queue(p, i, rkeys[i])
	}
	p.acks.queue(ctx, pl)
	_, _ = pl.Exec(ctx) // each command keeps its own error
	for j, i := range idx {
		written, err := op.read(i, cmds[j])
		switch {
		case err != nil && !eval && isNoScript(err):
			again = append(again, i)
			continue
		case err == nil && written:
			err = confirmed()
		}
		errs[i] = err
	}
	return again
}

// eachCluster sends the items todo to the masters that own their keys, and
// sends those that failed the way a failover explains again, for up to
// s.retryFor and within ctx, as do does for a one-key call.
func (s *Store) eachCluster(ctx context.Context, op eachOp, rkeys []string, todo []int, errs []error) {
	var until time.Time
	var ask []int // items answered ASK last time: through the ClusterClient
	for attempt := 0; ; attempt++ {
		s.eachNodes(ctx, op, rkeys, todo, errs)
		s.sendEach(ctx, s.cluster, op, rkeys, ask, errs)
		todo, ask = s.failedEach(ctx, append(todo, ask...), errs)
		if len(todo)+len(ask) == 0 || s.retryFor <= 0 || s.closed.Load() {
			return
		}
		now := time.Now()
		if until.IsZero() {
			until = now.Add(s.retryFor)
		}
		if now.After(until) {
			return
		}
		s.reloadSlots(now)
		backoff := min(maxBackoff, minBackoff<<min(attempt, 8))
		pause := time.NewTimer(min(backoff, until.Sub(now)))
		select {
		case <-pause.C:
		case <-ctx.Done():
			pause.Stop()
			return // each item keeps the error that says why it failed
		}
	}
}

// failedEach returns the items of idx whose error a failover or a slot
// migration explains: those to send again to their master, and those
// answered ASK, to send through the ClusterClient (but to their master on a
// store that waits for replicas, whose WAIT must follow the writes).
func (s *Store) failedEach(ctx context.Context, idx []int, errs []error) (again, ask []int) {
	for _, i := range idx {
		if errs[i] == nil || !retryable(ctx, errs[i]) {
			continue
		}
		if _, isAsk := redis.IsAskError(errs[i]); isAsk && s.replicas == 0 {
			ask = append(ask, i)
		} else {
			again = append(again, i)
		}
	}
	return again, ask
}

// eachNodes sends the items idx, grouped by the master that owns their key,
// to each master concurrently, and sets the error of each.
func (s *Store) eachNodes(ctx context.Context, op eachOp, rkeys []string, idx []int, errs []error) {
	groups := make(map[*redis.Client][]int, 3)
	for _, i := range idx {
		node, err := s.cluster.MasterForKey(ctx, rkeys[i])
		if err != nil {
			errs[i] = err
			continue
		}
		groups[node] = append(groups[node], i)
	}
	var wg sync.WaitGroup
	for node, g := range groups {
		wg.Go(func() { s.sendEach(ctx, node, op, rkeys, g, errs) })
	}
	wg.Wait()
}
