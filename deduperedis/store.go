package deduperedis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/batch"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the key prefix used when [Config.Prefix] is empty.
const DefaultPrefix = "dedupe:"

// Config configures a [Store]. The zero value gives the defaults.
type Config struct {
	// Prefix is put before every key the store writes: the key of a message is
	// Prefix + channel + ":" + message id, for example "dedupe:telegram:123".
	// Stores that share a Redis database and a Prefix share their marks and
	// claims; give unrelated deployments different prefixes. Default
	// [DefaultPrefix] ("dedupe:").
	Prefix string
	// TTL is how long a mark lasts when Mark is given ttl <= 0. Default 24 h
	// ([dedupe.DefaultTTL]). A negative TTL is an error.
	TTL time.Duration
	// Lease is how long a claim lasts when Claim or Extend is given lease <= 0.
	// Default 5 min ([dedupe.DefaultLease]). A negative Lease is an error.
	Lease time.Duration
	// Replicas is how many replicas must confirm a Mark, or a Claim that took
	// its key, before the store acknowledges it: each round trip that holds
	// such a write ends with WAIT Replicas ReplicaTimeout, on the same
	// connection. A write the replicas do not confirm in time fails with an
	// error wrapping [ErrNotReplicated] (it was applied on the master and may
	// or may not survive a failover). Default 0: acknowledged as soon as the
	// master applied it, so a failover may lose the last writes (see the
	// package documentation, "Durability"). A negative Replicas is an error,
	// and so is Replicas with a [*redis.Ring], whose WAIT could not follow a
	// command to its shard.
	Replicas int
	// ReplicaTimeout bounds the WAIT of [Config.Replicas]. Default 1 s
	// ([DefaultReplicaTimeout]); keep it below the deadlines of the callers'
	// contexts. A negative ReplicaTimeout is an error.
	ReplicaTimeout time.Duration
	// ClusterRetry is, on a [*redis.ClusterClient], how long a call that fails
	// the way a failover or a slot migration makes calls fail (connection
	// refused or cut, timeout, CLUSTERDOWN, TRYAGAIN, MOVED, ASK) is sent
	// again, after the store has had the client reload its slot map; always
	// within the call's context. Default 12 s ([DefaultClusterRetry]); a
	// negative ClusterRetry sends every call once. Other clients send every
	// call once.
	ClusterRetry time.Duration
	// Compact keeps marks in the compact layout: a mark is an 8-byte
	// fingerprint of its key (SHA-256), with its expiry, in a small Redis hash
	// shared by the marks of one shard ([Config.Shards]), which Redis keeps
	// as a listpack and drops as a whole when its last mark expires. It takes
	// about a sixth of the memory of the plain layout, where each mark is a
	// Redis string of its own. Every call is still one round trip on keys of
	// one hash slot; claims and results stay strings. When a mark ends is
	// decided, to the millisecond, by the clock of the gateway that reads
	// it: gateways whose clocks differ by d see a mark end up to d apart.
	// The server's clock only measures how long a bucket stays, a duration
	// never shorter than its latest mark needs, so a server clock ahead of
	// or behind the gateways' ends no mark early. A false
	// duplicate (two keys with one fingerprint in one shard) is about
	// 5 in 10^9 over 10^9 marks. [Store.ListMarks] is refused: a fingerprint
	// does not give its key back. Every store of a Prefix must agree on
	// Compact and Shards: the two layouts do not see each other's marks.
	// The prefix records them (see [Config.AdoptLayout] and the package
	// documentation, "Layout record"), and a store configured otherwise
	// fails every call with an error wrapping [ErrLayoutMismatch].
	// Needs Redis 6.2 or later; before 7.0 every call is a script, slower.
	// Default false, the plain layout. See docs/internals-redis.md, "Compact
	// layout".
	Compact bool
	// Shards is, on the compact layout, how many buckets the marks are
	// spread over. Redis keeps a bucket compact (a listpack) while it holds
	// at most hash-max-listpack-entries fields, 128 by default, and a Mark
	// that takes a bucket past 100 fields drops its expired ones: set Shards
	// to at least the marks live at once (messages a second × TTL) divided
	// by 64. Default 16,384: a million live marks, a TTL of 24 h at about 11
	// messages a second. A negative Shards is an error.
	Shards int
	// AdoptLayout has the store take Compact and Shards from its prefix's
	// layout record, whatever Config says, as a tool that reads or edits
	// the marks of gateways it knows nothing of does (the dedupe command).
	// On a prefix without a record it keeps Config's layout, but writes no
	// record: the record is left to a store that knows its layout. Default
	// false: the store records its layout on a prefix without a record, and
	// a prefix recording another is refused ([ErrLayoutMismatch]).
	AdoptLayout bool
}

// Store is a [dedupe.Store] on Redis, shared by every process that uses the
// same Redis database and [Config.Prefix]. Each key is one Redis string whose
// expiry is set with PX, so the Redis server's clock decides when marks and
// claims expire ([Config.Compact] keeps marks otherwise). Each operation is one command touching one Redis key, which
// makes the store work on Redis Cluster. A result kept with a mark ([Store.MarkResult]) is in the mark's string, and
// expires with it.
//
// A Store batches its calls (docs/internals-redis.md, "Batching"): the calls
// that arrive while a pipeline is in flight are sent together in the next one,
// up to 128; a call that finds nothing in flight is sent at once. Each call
// waits for its own command's reply and gets its own result.
//
// A Store does not own a client given to [New]: [Store.Close] leaves it open.
// A Store made by [OpenURL] owns its client and closes it.
//
// A Store is safe for concurrent use.
type Store struct {
	client     redis.UniversalClient
	cluster    *redis.ClusterClient // client, if it is one; then nodes batch, not b
	prefix     string
	ttl, lease time.Duration
	ownsClient bool
	closed     atomic.Bool
	closeOnce  sync.Once
	closeErr   error
	b          batch.Batcher[pipe]
	nodes      nodes
	batches    sync.RWMutex // read-locked by each batch in flight (each.go); Close waits for them

	replicas       int           // Config.Replicas
	replicaTimeout time.Duration // Config.ReplicaTimeout
	retryFor       time.Duration // Config.ClusterRetry; <= 0: no retry

	compact  bool             // Config.Compact (compact.go)
	shards   int              // Config.Shards
	scripted atomic.Bool      // compact: the server is older than Redis 7.0, Claim and Mark run scripts (compact.go)
	expiries expiries         // compact: the buckets' expiries this store set (compact.go)
	now      func() time.Time // compact: the gateway's clock (nil: time.Now); tests set it (export_test.go)

	layout layoutGate // the checks of the prefix's layout record (layout.go)
}

// New returns a store that keeps its marks and claims in Redis through client,
// which may be a [*redis.Client], a [*redis.ClusterClient], a
// [*redis.Ring] or a failover client. New does not contact the server; call
// [Store.Ping] to check it, and the prefix's layout record (see
// [ErrLayoutMismatch]), at start-up. The store does not own client: [Store.Close] leaves
// it open for the caller to close after the store.
//
// Set [redis.Options.ContextTimeoutEnabled] on the client for the deadlines of
// contexts to bound calls in flight; a context cancelled before a call is always
// honoured. On a [*redis.ClusterClient] the store batches per master and sends
// a call again after a failover (see the package documentation, "Redis
// Cluster", and [ExampleNew_cluster] for the client options that matter).
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	if isNil(client) {
		return nil, errors.New("dedupe: redis: nil client")
	}
	if err := cfg.check(client); err != nil {
		return nil, err
	}
	s := &Store{client: client, prefix: cfg.Prefix, ttl: cfg.TTL, lease: cfg.Lease,
		replicas: cfg.Replicas, replicaTimeout: cfg.ReplicaTimeout, retryFor: cfg.ClusterRetry,
		compact: cfg.Compact, shards: cfg.Shards}
	s.cluster, _ = client.(*redis.ClusterClient)
	s.layout.init(cfg.AdoptLayout)
	s.b.Rounds, s.b.Closed = roundsInFlight, dedupe.ErrClosed
	s.b.Send = func(r *batch.Round, calls []*batch.Call[pipe]) { s.send(r.Context(), s.client, calls) }
	return s, nil
}

// check validates cfg for client and fills in its defaults.
func (cfg *Config) check(client redis.UniversalClient) error {
	switch {
	case cfg.TTL < 0:
		return fmt.Errorf("dedupe: redis: negative TTL %v", cfg.TTL)
	case cfg.Lease < 0:
		return fmt.Errorf("dedupe: redis: negative lease %v", cfg.Lease)
	case cfg.Replicas < 0:
		return fmt.Errorf("dedupe: redis: negative Replicas %d", cfg.Replicas)
	case cfg.ReplicaTimeout < 0:
		return fmt.Errorf("dedupe: redis: negative ReplicaTimeout %v", cfg.ReplicaTimeout)
	case cfg.Shards < 0:
		return fmt.Errorf("dedupe: redis: negative Shards %d", cfg.Shards)
	}
	if _, ring := client.(*redis.Ring); ring && cfg.Replicas > 0 {
		return errors.New("dedupe: redis: Replicas on a Ring: WAIT cannot follow a command to its shard")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	cfg.TTL = orDefault(cfg.TTL, dedupe.DefaultTTL)
	cfg.Lease = orDefault(cfg.Lease, dedupe.DefaultLease)
	cfg.ReplicaTimeout = orDefault(cfg.ReplicaTimeout, DefaultReplicaTimeout)
	cfg.ClusterRetry = orDefault(cfg.ClusterRetry, DefaultClusterRetry)
	if cfg.Shards == 0 {
		cfg.Shards = defaultShards
	}
	return nil
}

// orDefault returns d if v is zero, and v otherwise.
func orDefault(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}

// isNil reports whether c is nil or a nil pointer of one of go-redis's clients.
func isNil(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// key returns the Redis key of k: its mark, claim and result on the plain
// layout, its claim and result on the compact one.
func (s *Store) key(k dedupe.Key) string {
	if s.compact {
		return s.compactKeyOf(k).claim
	}
	return s.prefix + k.Channel + ":" + k.MessageID
}

// check returns the error a call with key should fail with before its own
// I/O: the store closed, the context ended, key invalid, or the layout
// check (layout.go) failed. A call validates its other arguments first.
func (s *Store) check(ctx context.Context, op string, key dedupe.Key) error {
	if s.closed.Load() {
		return dedupe.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dedupe: redis: %s %s: %w", op, key, err)
	}
	if err := key.Validate(); err != nil {
		return err
	}
	if err := s.layoutChecked(ctx); err != nil {
		return s.fail(ctx, op, key, err)
	}
	return nil
}

// fail wraps the error of a Redis call. A context that ended during the call is
// reported too, so errors.Is finds [context.Canceled] or
// [context.DeadlineExceeded] whatever the client returned.
func (s *Store) fail(ctx context.Context, op string, key dedupe.Key, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("dedupe: redis: %s %s: %w (%w)", op, key, cerr, err)
	}
	return fmt.Errorf("dedupe: redis: %s %s: %w", op, key, err)
}

// Exists reports whether key is marked and unexpired. It is one GETRANGE of
// the value's first two bytes, which tell a mark (see [Store.MarkResult]) from
// a claim without reading a result kept with the mark.
func (s *Store) Exists(ctx context.Context, key dedupe.Key) (bool, error) {
	if err := s.check(ctx, "exists", key); err != nil {
		return false, err
	}
	if s.compact {
		return s.existsCompact(ctx, key)
	}
	k := s.key(key)
	var head string
	err := s.do(ctx, k, func(p pipe) func() error {
		cmd := p.GetRange(p.ctx, k, 0, int64(len(resultPrefix))-1)
		return func() (err error) {
			head, err = cmd.Result()
			return err
		}
	})
	if err != nil {
		return false, s.fail(ctx, "exists", key, err)
	}
	return head == markValue || head == resultPrefix, nil
}

// Mark records key as processed for ttl (ttl <= 0: the configured TTL),
// replacing any mark or claim on it, and any result kept with a mark. It is
// one SET with PX.
func (s *Store) Mark(ctx context.Context, key dedupe.Key, ttl time.Duration) error {
	if err := s.check(ctx, "mark", key); err != nil {
		return err
	}
	return s.mark(ctx, key, markValue, ttl)
}

// mark sets key's value to value, a mark, for ttl (ttl <= 0: the configured
// TTL), in the next pipeline, and waits for the replicas if the store does.
// value is a string or a []byte the caller no longer changes.
func (s *Store) mark(ctx context.Context, key dedupe.Key, value any, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = s.ttl
	}
	if s.compact {
		return s.markCompact(ctx, key, value, ms(ttl))
	}
	k, px := s.key(key), roundMs(ttl)
	err := s.do(ctx, k, func(p pipe) func() error {
		cmd, replicated := p.Set(p.ctx, k, value, px), p.need()
		return func() error {
			if err := cmd.Err(); err != nil {
				return err
			}
			return replicated()
		}
	})
	if err != nil {
		return s.fail(ctx, "mark", key, err)
	}
	return nil
}

// Claim takes c.Key for c.Token, for lease (lease <= 0: the configured
// lease), unless it is marked or claimed by another token; see
// [dedupe.Store.Claim]. It is one Lua script call (EVALSHA) that sets the
// claim with PX if the key is absent and otherwise reports what holds it, so a
// duplicate is told apart from a claim in flight in the same atomic step. On
// the compact layout it is one SET NX GET of the claim then one HGET of the
// mark, in one round trip (see [Config.Compact]).
//
// A Claim that returns an error may still have taken the key on the server.
// Claim again with the same c, or Release(c), to settle it; [dedupe.Deduper]
// does.
func (s *Store) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	if err := s.check(ctx, "claim", c.Key); err != nil {
		return 0, err
	}
	if lease <= 0 {
		lease = s.lease
	}
	var n int64
	var err error
	if s.compact && !s.scripted.Load() {
		n, err = s.claimCompact(ctx, c, ms(lease))
	} else {
		k, run := s.claimCall(c, ms(lease))
		n, err = s.script(ctx, k, run, claimTaken)
	}
	switch {
	case err != nil:
		return 0, s.fail(ctx, "claim", c.Key, err)
	case n == claimTaken:
		return dedupe.Claimed, nil
	case n == claimMarked:
		return dedupe.Duplicate, nil
	}
	return dedupe.InFlight, nil
}

// Extend renews c's lease to lease from now (lease <= 0: the configured lease)
// if c still holds its key, and otherwise returns [dedupe.ErrNotOwner]. It is
// one script call comparing the token and setting PEXPIRE.
func (s *Store) Extend(ctx context.Context, c dedupe.Claim, lease time.Duration) error {
	if lease <= 0 {
		lease = s.lease
	}
	return s.update(ctx, "extend", extendScript, c, ms(lease))
}

// Release drops c's claim if c still holds its key, and otherwise returns
// [dedupe.ErrNotOwner]. Either way it fences c's token for the configured
// lease: a Claim with it that reaches Redis later (sent before the Release, on
// a connection that was given up) takes nothing. It is one script call.
//
// If the client retries a Release whose first reply was lost, the retry finds
// the claim gone and Release returns [dedupe.ErrNotOwner] although the claim
// was dropped.
func (s *Store) Release(ctx context.Context, c dedupe.Claim) error {
	return s.update(ctx, "release", releaseScript, c, ms(s.lease))
}

// update runs script on c's key with c's token and the argument arg, and
// turns a result other than 1 into [dedupe.ErrNotOwner].
func (s *Store) update(ctx context.Context, op string, script *redis.Script, c dedupe.Claim, arg int64) error {
	if c.Key.Validate() == nil && c.Validate() != nil {
		return fmt.Errorf("dedupe: redis: %s %s: %w: not a claim token", op, c.Key, dedupe.ErrNotOwner)
	}
	if err := s.check(ctx, op, c.Key); err != nil {
		return err
	}
	k := s.key(c.Key)
	n, err := s.script(ctx, k, func(p pipe) *redis.Cmd { return p.run(script, k, c.Token, arg) }, 0)
	if err != nil {
		return s.fail(ctx, op, c.Key, err)
	}
	if n != 1 {
		return fmt.Errorf("dedupe: redis: %s %s: %w", op, c.Key, dedupe.ErrNotOwner)
	}
	return nil
}

// script runs the script that run queues, on the Redis key k (the first
// of its keys), in the next pipeline, and returns its integer result. If the
// store waits for replicas, a result equal to confirm (a claim taken) is
// returned only once they confirmed it; confirm 0 asks for no confirmation.
func (s *Store) script(ctx context.Context, k string, run func(p pipe) *redis.Cmd, confirm int64) (int64, error) {
	var n int64
	err := s.do(ctx, k, func(p pipe) func() error {
		cmd := run(p)
		replicated := func() error { return nil }
		if confirm != 0 {
			replicated = p.need()
		}
		return func() (err error) {
			if n, err = cmd.Int64(); err != nil || n != confirm {
				return err
			}
			return replicated()
		}
	})
	if err != nil {
		return 0, err // n is not ours to read: a call given up may be answered later
	}
	return n, nil
}

// Ping checks that the Redis server answers, with one PING, and that the
// store's layout agrees with its prefix's record ([ErrLayoutMismatch]),
// recording it on a prefix without one, as the first call of the store
// would. It is meant for start-up and health checks: at start-up it refuses
// a misconfigured gateway before it takes any message. The other methods do
// not need it.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return dedupe.ErrClosed
	}
	if err := s.client.Ping(ctx).Err(); err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			return fmt.Errorf("dedupe: redis: ping: %w (%w)", cerr, err)
		}
		return fmt.Errorf("dedupe: redis: ping: %w", err)
	}
	if err := s.layoutChecked(ctx); err != nil {
		return fmt.Errorf("dedupe: redis: ping: %w", err)
	}
	return nil
}

// MinLease returns the shortest claim lease that outlasts a failover the
// store rides out: on a [*redis.ClusterClient], its retry window
// ([Config.ClusterRetry]), within which a dead master's replica takes over;
// otherwise 0. [dedupe.New] warns when its lease is shorter: a claim could
// then run out during a failover, and a mark queued across it would let
// another instance claim the message before the mark lands.
func (s *Store) MinLease() time.Duration {
	if s.cluster == nil || s.retryFor <= 0 {
		return 0
	}
	return s.retryFor
}

// Backend returns "redis".
func (s *Store) Backend() string { return "redis" }

// Close marks the store closed: later calls return [dedupe.ErrClosed], and
// so do the calls still queued for a pipeline. It waits for the pipelines in
// flight to be answered, and for the batches in flight ([Store.ClaimEach]
// and its peers) to return. It closes the client only if the store owns it (see
// [OpenURL]); a client given to [New] stays open. Close is idempotent. Marks
// and claims stay in Redis until they expire.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.batches.Lock() // waits for the batches in flight; later ones see closed
		s.batches.Unlock()
		s.b.Close()
		s.nodes.close()
		if s.ownsClient {
			if err := s.client.Close(); err != nil {
				s.closeErr = fmt.Errorf("dedupe: redis: close: %w", err)
			}
		}
	})
	return s.closeErr
}

// ms returns d in whole milliseconds, rounded up, and at least 1: PX takes
// milliseconds, and a positive duration must not become "no wait at all".
func ms(d time.Duration) int64 {
	n := d / time.Millisecond
	if d%time.Millisecond != 0 {
		n++
	}
	return max(1, int64(n))
}

// roundMs returns d rounded up to whole milliseconds, at least 1 ms.
func roundMs(d time.Duration) time.Duration {
	return time.Duration(ms(d)) * time.Millisecond
}
