package deduperedis

import (
	"context"

	"github.com/gatewaykit/dedupe/batch"
	"github.com/redis/go-redis/v9"
)

// roundsInFlight is how many pipelines a Store has in flight at most, each on
// a connection of its own, per Redis server (on a ClusterClient, per master).
// Two keep Redis busy while the client reads the replies of the other
// pipeline, and keep the pipelines full: a call that finds a pipeline free is
// sent at once, alone, so more pipelines in flight mean more of them carrying
// one or two calls under load. Measured with 64 callers of Claim then Mark
// (issue 22, item 7): 5.6 calls a pipeline with 8 in flight, 15.8 with 4,
// 27.5 with 2 (batch.Batcher's gather on; the hand-gathered ceiling of 2
// goroutines x 32 keys is 32). A pipeline that stops answering holds up only
// its own calls.
const roundsInFlight = 2

// pipe is the request of one round trip: a go-redis pipeline on one
// connection, or, for a lone call of a store that waits for no replica, the
// client itself. Scripts go by EVALSHA, or by EVAL (which also loads them)
// when eval is set, for the calls whose EVALSHA the server answered NOSCRIPT.
// acks, if not nil, is the WAIT the round trip ends with (see replicas.go).
type pipe struct {
	redis.Cmdable
	ctx  context.Context
	eval bool
	acks *acks
}

// run queues script on key with args.
func (p pipe) run(script *redis.Script, key string, args ...any) *redis.Cmd {
	return p.runKeys(script, []string{key}, args...)
}

// runKeys queues script on keys with args.
func (p pipe) runKeys(script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if p.eval {
		return script.Eval(p.ctx, p, keys, args...)
	}
	return script.EvalSha(p.ctx, p, keys, args...)
}

// pipelined returns where a call of several commands queues them so that
// they go in one round trip, in order, and the function that sends them:
// p itself and a no-op in a pipeline, or a pipeline of the call's own when p
// is the client (a lone call, which exec sends as it is queued).
func (p pipe) pipelined() (redis.Pipeliner, func()) {
	if pl, ok := p.Cmdable.(redis.Pipeliner); ok {
		return pl, func() {}
	}
	pl := p.Pipeline()
	return pl, func() { _, _ = pl.Exec(p.ctx) } // each command keeps its own error
}

// send sends calls to client in one round trip and answers each with its own
// error. Calls whose script the server did not know are sent again by EVAL,
// in a second round trip, unless their caller left meanwhile.
func (s *Store) send(ctx context.Context, client redis.Cmdable, calls []*batch.Call[pipe]) {
	again := s.exec(ctx, client, calls, false)
	live := again[:0]
	for _, c := range again {
		if c.Sent() {
			live = append(live, c)
		}
	}
	if len(live) > 0 {
		s.exec(ctx, client, live, true)
	}
}

// exec sends calls to client in one pipeline, or as one command if there is
// one and no WAIT is to follow it, and answers them, but for those answered
// NOSCRIPT unless eval is set: those it returns.
func (s *Store) exec(ctx context.Context, client redis.Cmdable, calls []*batch.Call[pipe], eval bool) (again []*batch.Call[pipe]) {
	p := pipe{Cmdable: client, ctx: ctx, eval: eval}
	var pl redis.Pipeliner
	if len(calls) > 1 || s.replicas > 0 {
		pl = client.Pipeline()
		p.Cmdable = pl
	}
	if s.replicas > 0 {
		p.acks = &acks{replicas: s.replicas, timeout: s.replicaTimeout}
	}
	reads := make([]func() error, len(calls))
	for i, c := range calls {
		reads[i] = c.Queue(p)
	}
	if pl != nil {
		p.acks.queue(ctx, pl)
		_, _ = pl.Exec(ctx) // each command keeps its own error
	}
	for i, c := range calls {
		err := reads[i]()
		if !eval && err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") { // HasErrorPrefix allocates even for nil
			again = append(again, c)
			continue
		}
		c.Answer(err)
	}
	return again
}
