package deduperedis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated reports a Mark or a Claim that the master applied but that
// fewer replicas than [Config.Replicas] confirmed within
// [Config.ReplicaTimeout]: a failover may still lose it. It is an ambiguous
// failure, as a lost reply is: [dedupe.Deduper] retries such a Mark and
// releases such a Claim.
var ErrNotReplicated = errors.New("dedupe: redis: not confirmed by the replicas")

// DefaultReplicaTimeout is how long a store with [Config.Replicas] set waits
// for its replicas when [Config.ReplicaTimeout] is zero.
const DefaultReplicaTimeout = time.Second

// acks is the WAIT that ends a round trip of a store with [Config.Replicas]
// set. WAIT blocks until the replicas acknowledged every write sent before it
// on the same connection, or until its timeout, and returns how many did; so
// one WAIT after all the commands of a pipeline confirms all of its writes.
// Only the pipeline's writes that need it (a Mark, a Claim that took its key)
// read its reply.
type acks struct {
	replicas int
	timeout  time.Duration
	wanted   bool          // a write of the round trip reads cmd
	cmd      *redis.IntCmd // the WAIT, once queued
}

// need records that a write of the round trip waits for the replicas, and
// returns the check its call makes after the round trip: nil if a replicas
// confirmed it, an error wrapping [ErrNotReplicated] if not. On a store that
// waits for no replica, the check always returns nil.
func (p pipe) need() (check func() error) {
	a := p.acks
	if a == nil {
		return func() error { return nil }
	}
	a.wanted = true
	return a.check
}

// queue adds the WAIT to pl if a write of the round trip needs it.
func (a *acks) queue(ctx context.Context, pl redis.Pipeliner) {
	if a != nil && a.wanted {
		a.cmd = redis.NewIntCmd(ctx, "wait", a.replicas, ms(a.timeout))
		_ = pl.Process(ctx, a.cmd) // queued; its outcome is read by check
	}
}

// check returns nil if at least a.replicas replicas confirmed the round
// trip's writes, and otherwise an error wrapping [ErrNotReplicated].
func (a *acks) check() error {
	if a.cmd == nil {
		return fmt.Errorf("%w: WAIT not sent", ErrNotReplicated)
	}
	n, err := a.cmd.Result()
	switch {
	case err != nil:
		return fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	case n < int64(a.replicas):
		return fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, n, a.replicas, a.timeout)
	}
	return nil
}
