package deduperedis

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/batch"
	"github.com/redis/go-redis/v9"
)

// How a Store runs on Redis Cluster (a [*redis.ClusterClient]):
//
// Per-node batches. A go-redis cluster pipeline splits its commands by node
// and returns when every node has answered (ClusterClient.processPipeline
// waits for the goroutine of each node), so one stalled master would hold up
// the calls of every other. A Store therefore keeps one batcher per master,
// found with ClusterClient.MasterForKey from the slot map the client caches,
// and sends each round trip straight to that master's client: a stalled node
// delays only the keys it owns.
//
// Recovery after a node dies. go-redis reloads its slot map on a MOVED or
// ASK reply (ClusterClient.process, checkMovedErr) and every
// ClusterOptions.ClusterStateReloadInterval (60 s by default,
// clusterStateHolder.Get); a dead master answers nothing, so until then the
// client keeps dialling it. On a connection error, a timeout, CLUSTERDOWN,
// TRYAGAIN, MOVED, ASK, LOADING, READONLY or MASTERDOWN, a Store asks the
// client to reload its slot map (ClusterClient.ReloadState, at most every
// reloadEvery) and sends the call again, for up to [Config.ClusterRetry] and
// within its context. Every operation of the store is safe to send twice: a
// Claim recognises its own token, a Mark is a SET, an Extend a PEXPIRE, and
// a Release that finds its claim dropped already says ErrNotOwner.

// reloadEvery is the shortest interval between two slot-map reloads a Store
// asks for. go-redis runs at most one reload at a time and waits 200 ms
// after each (clusterStateHolder.LazyReload).
const reloadEvery = 250 * time.Millisecond

// DefaultClusterRetry is how long a call on Redis Cluster is retried after a
// failure that a failover explains, when [Config.ClusterRetry] is zero: twice
// the default cluster-node-timeout (5 s), the time a replica takes to be
// promoted, plus 2 s.
const DefaultClusterRetry = 12 * time.Second

// Retry backoff: the first retry waits minBackoff, each next one twice as
// long, up to maxBackoff.
const (
	minBackoff = 20 * time.Millisecond
	maxBackoff = 500 * time.Millisecond
)

// nodes is the batchers of a Store on a ClusterClient, one per master
// address.
type nodes struct {
	mu       sync.RWMutex
	batchers map[string]*batch.Batcher[pipe]
	closed   bool
	reloaded atomic.Int64 // unix nanoseconds of the last reload asked for
}

// do runs the call queue on key's batcher and returns its error. On a
// ClusterClient it retries the failures a failover explains (see retryable)
// for up to s.retryFor, within ctx, reloading the slot map first.
func (s *Store) do(ctx context.Context, key string, queue func(pipe) func() error) error {
	if s.cluster == nil {
		return s.b.Do(ctx, key, queue)
	}
	var until time.Time
	ask := false
	for attempt := 0; ; attempt++ {
		var err error
		if ask && s.replicas == 0 {
			err = s.direct(ctx, queue)
		} else {
			err = s.doNode(ctx, key, queue)
		}
		if err == nil || !retryable(ctx, err) || s.retryFor <= 0 {
			return err
		}
		_, ask = redis.IsAskError(err)
		if s.compact {
			s.expiries.forget() // a failover may have lost a bucket's PEXPIRE (compact.go)
		}
		now := time.Now()
		if until.IsZero() {
			until = now.Add(s.retryFor)
		}
		if now.After(until) {
			return err
		}
		s.reloadSlots(now)
		backoff := min(maxBackoff, minBackoff<<min(attempt, 8))
		pause := time.NewTimer(min(backoff, until.Sub(now)))
		select {
		case <-pause.C:
		case <-ctx.Done():
			pause.Stop()
			return err // the caller's context ended: the last error says why the call failed
		}
	}
}

// doNode runs the call on the batcher of the master that owns key in the
// client's slot map.
func (s *Store) doNode(ctx context.Context, key string, queue func(pipe) func() error) error {
	node, err := s.cluster.MasterForKey(ctx, key)
	if err != nil {
		return err
	}
	b, err := s.nodes.batcher(s, node.Options().Addr)
	if err != nil {
		return err
	}
	return b.Do(ctx, key, queue)
}

// direct sends the call alone through the ClusterClient, which follows an
// ASK redirection (ClusterClient.process sends ASKING to the importing node):
// the way of a call whose key is in a slot being migrated. A store that waits
// for replicas cannot go this way, as its WAIT would not follow the command
// to the same connection; it retries on the owner's batcher until the slot
// has moved.
func (s *Store) direct(ctx context.Context, queue func(pipe) func() error) error {
	err := queue(pipe{Cmdable: s.cluster, ctx: ctx})()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		err = queue(pipe{Cmdable: s.cluster, ctx: ctx, eval: true})()
	}
	return err
}

// batcher returns the batcher of the master at addr, made at its first call.
func (n *nodes) batcher(s *Store, addr string) (*batch.Batcher[pipe], error) {
	n.mu.RLock()
	b, closed := n.batchers[addr], n.closed
	n.mu.RUnlock()
	if b != nil {
		return b, nil
	}
	if closed {
		return nil, dedupe.ErrClosed
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, dedupe.ErrClosed
	}
	if b = n.batchers[addr]; b == nil {
		b = &batch.Batcher[pipe]{Rounds: roundsInFlight, Closed: dedupe.ErrClosed}
		b.Send = func(r *batch.Round, calls []*batch.Call[pipe]) { s.sendNode(r, calls) }
		if n.batchers == nil {
			n.batchers = make(map[string]*batch.Batcher[pipe])
		}
		n.batchers[addr] = b
	}
	return b, nil
}

// sendNode sends the calls of a master's batcher to the master that owns the
// first of their keys now. A call whose key moved meanwhile is answered MOVED
// by that node, and do sends it again.
func (s *Store) sendNode(r *batch.Round, calls []*batch.Call[pipe]) {
	node, err := s.cluster.MasterForKey(r.Context(), calls[0].Key())
	if err != nil {
		for _, c := range calls {
			c.Answer(err)
		}
		return
	}
	s.send(r.Context(), node, calls)
}

// close closes every batcher, waiting for their round trips in flight.
func (n *nodes) close() {
	n.mu.Lock()
	n.closed = true
	bs := n.batchers
	n.mu.Unlock()
	for _, b := range bs {
		b.Close()
	}
}

// reloadSlots asks the client to reload its slot map, unless it was asked
// less than reloadEvery ago.
func (s *Store) reloadSlots(now time.Time) {
	last := s.nodes.reloaded.Load()
	if now.UnixNano()-last < int64(reloadEvery) || !s.nodes.reloaded.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	s.cluster.ReloadState(context.Background()) // asynchronous: a goroutine of the client
}

// retryable reports whether err, the error of a call whose context ctx has not
// ended, is one that a failover or a slot migration explains: the node did
// not answer (connection refused, reset or cut, a timeout, a closed client of
// a node removed from the slot map), or it answered that the slot is
// elsewhere or not served right now.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, dedupe.ErrClosed) || errors.Is(err, ErrNotReplicated) {
		return false
	}
	if _, ok := redis.IsMovedError(err); ok {
		return true
	}
	if _, ok := redis.IsAskError(err); ok {
		return true
	}
	switch {
	case redis.IsClusterDownError(err), redis.IsTryAgainError(err), redis.IsLoadingError(err),
		redis.IsReadOnlyError(err), redis.IsMasterDownError(err):
		return true
	case errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	var nerr net.Error
	return errors.As(err, &nerr) // a dial error or an i/o timeout: the context has not ended
}
