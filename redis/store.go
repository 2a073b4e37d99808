package redis

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gatewaykit/dedupe"
	goredis "github.com/redis/go-redis/v9"
)

// DefaultPrefix is the key prefix used when [Config.Prefix] is empty.
const DefaultPrefix = "dedupe:"

// Values stored under a message key. A mark is the single byte "m". A claim
// is "c:" followed by its token (see [dedupe.Claim]). The tokens of released
// claims follow, each after a space: they are fenced, for as long as the key
// keeps its value (see releaseScript). A key whose claim was released holds
// "r:" and the fenced tokens, and is absent to any other token. Tokens hold no
// spaces, so " " + token + " " is found in a value only as a fence. Any other
// value found under a key is treated as a claim held by someone else.
const markValue = "m"

// Outcomes of claimScript.
const (
	claimTaken  = 1
	claimMarked = 2
	claimHeld   = 3
)

// claimScript takes KEYS[1] for the token ARGV[1], for ARGV[2] milliseconds,
// and returns claimTaken, or claimMarked for a mark, or claimHeld for another
// token's claim. A claim of the caller's own token is renewed and taken again,
// so a claim retried after a lost reply still wins; a fenced token takes
// nothing (claimHeld), so a claim that reaches the server after its own
// Release, late on another connection, strands nothing. A key that holds
// released tokens is taken as if absent, keeping their fences.
var claimScript = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
	redis.call('SET', KEYS[1], 'c:' .. ARGV[1], 'PX', ARGV[2])
	return 1
end
if v == 'm' then
	return 2
end
local owner, fences = string.match(v, '^c:(%S+)(.*)$')
if not owner then
	fences = string.match(v, '^r:(.*)$')
	if not fences then
		return 3
	end
end
if string.find(v .. ' ', ' ' .. ARGV[1] .. ' ', 1, true) then
	return 3
end
if owner == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return 1
end
if owner then
	return 3
end
redis.call('SET', KEYS[1], 'c:' .. ARGV[1] .. fences, 'PX', ARGV[2])
return 1
`)

// releaseScript drops the claim of the token ARGV[1] from KEYS[1] and returns
// 1 if the key held it, and 0 otherwise. Either way it fences the token, so
// that a Claim sent with it before the Release but arriving after it takes
// nothing: the key then holds "r:" and the fenced tokens for ARGV[2]
// milliseconds, or, if another token's claim holds it, that claim with the
// token added to its fences and its expiry kept. A mark is left alone: a late
// claim finds it a duplicate. At most the last eight tokens are fenced.
var releaseScript = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
local owner, fences = nil, ''
if v then
	owner, fences = string.match(v, '^c:(%S+)(.*)$')
	if not owner then
		fences = string.match(v, '^r:(.*)$')
		if not fences then
			return 0
		end
	end
end
local kept = {}
for f in string.gmatch(fences, '%S+') do
	if f ~= ARGV[1] then
		kept[#kept + 1] = f
	end
end
local list = ''
for i = math.max(1, #kept - 6), #kept do
	list = list .. ' ' .. kept[i]
end
list = list .. ' ' .. ARGV[1]
if owner and owner ~= ARGV[1] then
	local ttl = redis.call('PTTL', KEYS[1])
	if ttl > 0 then
		redis.call('SET', KEYS[1], 'c:' .. owner .. list, 'PX', ttl)
	end
	return 0
end
redis.call('SET', KEYS[1], 'r:' .. list, 'PX', ARGV[2])
if owner then
	return 1
end
return 0
`)

// extendScript sets the expiry of KEYS[1] to ARGV[2] milliseconds from now if
// the token ARGV[1] holds its claim. It returns 1 if it did and 0 otherwise.
var extendScript = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.match(v, '^c:(%S+)') == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

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
}

// Store is a [dedupe.Store] on Redis, shared by every process that uses the
// same Redis database and [Config.Prefix]. Each key is one Redis string whose
// expiry is set with PX, so the Redis server's clock decides when marks and
// claims expire. Each method is one round trip touching one Redis key, which
// makes the store work on Redis Cluster.
//
// A Store does not own a client given to [New]: [Store.Close] leaves it open.
// A Store made by [OpenURL] owns its client and closes it.
//
// A Store is safe for concurrent use.
type Store struct {
	client     goredis.UniversalClient
	prefix     string
	ttl, lease time.Duration
	ownsClient bool
	closed     atomic.Bool
}

var _ dedupe.Store = (*Store)(nil)

// New returns a store that keeps its marks and claims in Redis through client,
// which may be a [*goredis.Client], a [*goredis.ClusterClient], a
// [*goredis.Ring] or a failover client. New does not contact the server; call
// [Store.Ping] to check it. The store does not own client: [Store.Close] leaves
// it open for the caller to close after the store.
//
// Set [goredis.Options.ContextTimeoutEnabled] on the client for the deadlines of
// contexts to bound calls in flight; a context cancelled before a call is always
// honoured.
func New(client goredis.UniversalClient, cfg Config) (*Store, error) {
	if isNil(client) {
		return nil, errors.New("dedupe: redis: nil client")
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("dedupe: redis: negative TTL %v", cfg.TTL)
	}
	if cfg.Lease < 0 {
		return nil, fmt.Errorf("dedupe: redis: negative lease %v", cfg.Lease)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.TTL == 0 {
		cfg.TTL = dedupe.DefaultTTL
	}
	if cfg.Lease == 0 {
		cfg.Lease = dedupe.DefaultLease
	}
	return &Store{client: client, prefix: cfg.Prefix, ttl: cfg.TTL, lease: cfg.Lease}, nil
}

// isNil reports whether c is nil or a nil pointer of one of go-redis's clients.
func isNil(c goredis.UniversalClient) bool {
	switch c := c.(type) {
	case nil:
		return true
	case *goredis.Client:
		return c == nil
	case *goredis.ClusterClient:
		return c == nil
	case *goredis.Ring:
		return c == nil
	}
	return false
}

// OpenURL returns a store on a client of its own, made from a URL such as
// "redis://127.0.0.1:6379/0", "rediss://user:password@host:6380/1" or
// "unix:///run/redis.sock?db=2" (the forms and query options of
// [goredis.ParseURL]). The client honours context deadlines
// ([goredis.Options.ContextTimeoutEnabled]). OpenURL does not contact the
// server; call [Store.Ping] to check it. The store owns the client and
// [Store.Close] closes it.
//
// For Redis Cluster, Sentinel or custom client options, make the client and
// call [New].
func OpenURL(url string, cfg Config) (*Store, error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		// The error does not repeat the URL, which may hold a password.
		return nil, fmt.Errorf("dedupe: redis: parse URL: %w", err)
	}
	opt.ContextTimeoutEnabled = true
	client := goredis.NewClient(opt)
	s, err := New(client, cfg)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	s.ownsClient = true
	return s, nil
}

// key returns the Redis key of k.
func (s *Store) key(k dedupe.Key) string {
	return s.prefix + k.Channel + ":" + k.MessageID
}

// check returns the error a call with key should fail with before any I/O.
func (s *Store) check(ctx context.Context, key dedupe.Key) error {
	if s.closed.Load() {
		return dedupe.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return key.Validate()
}

// fail wraps the error of a Redis call. A context that ended during the call is
// reported too, so errors.Is finds [context.Canceled] or
// [context.DeadlineExceeded] whatever the client returned; a store closed
// during the call is reported as [dedupe.ErrClosed].
func (s *Store) fail(ctx context.Context, op string, key dedupe.Key, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("%w: redis %s %s: %w", dedupe.ErrClosed, op, key, err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("dedupe: redis %s %s: %w (%w)", op, key, cerr, err)
	}
	return fmt.Errorf("dedupe: redis %s %s: %w", op, key, err)
}

// Exists reports whether key is marked and unexpired. It is one GET.
func (s *Store) Exists(ctx context.Context, key dedupe.Key) (bool, error) {
	if err := s.check(ctx, key); err != nil {
		return false, err
	}
	v, err := s.client.Get(ctx, s.key(key)).Result()
	if err == goredis.Nil {
		return false, nil
	}
	if err != nil {
		return false, s.fail(ctx, "exists", key, err)
	}
	return v == markValue, nil
}

// Mark records key as processed for ttl (ttl <= 0: the configured TTL),
// replacing any mark or claim on it. It is one SET with PX.
func (s *Store) Mark(ctx context.Context, key dedupe.Key, ttl time.Duration) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	if ttl <= 0 {
		ttl = s.ttl
	}
	if err := s.client.Set(ctx, s.key(key), markValue, roundMs(ttl)).Err(); err != nil {
		return s.fail(ctx, "mark", key, err)
	}
	return nil
}

// Claim takes c.Key for c.Token, for lease (lease <= 0: the configured
// lease), unless it is marked or claimed by another token; see
// [dedupe.Store.Claim]. It is one Lua script call (EVALSHA) that sets the
// claim with PX if the key is absent and otherwise returns the value it holds,
// so a duplicate is told apart from a claim in flight in the same atomic step.
//
// A Claim that returns an error may still have taken the key on the server.
// Claim again with the same c, or Release(c), to settle it; [dedupe.Deduper]
// does.
func (s *Store) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	if err := s.check(ctx, c.Key); err != nil {
		return 0, err
	}
	if err := c.Validate(); err != nil {
		return 0, err
	}
	if lease <= 0 {
		lease = s.lease
	}
	n, err := claimScript.Run(ctx, s.client, []string{s.key(c.Key)}, c.Token, ms(lease)).Int64()
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
// [dedupe.ErrNotOwner]. It is one script call comparing the token and deleting
// the key.
//
// If the client retries a Release whose first reply was lost, the retry finds
// the claim gone and Release returns [dedupe.ErrNotOwner] although the claim
// was dropped.
func (s *Store) Release(ctx context.Context, c dedupe.Claim) error {
	return s.update(ctx, "release", releaseScript, c, ms(s.lease))
}

// update runs script on c's key with c's claim value and extra arguments, and
// turns a 0 result into [dedupe.ErrNotOwner].
func (s *Store) update(ctx context.Context, op string, script *goredis.Script, c dedupe.Claim, args ...any) error {
	if err := s.check(ctx, c.Key); err != nil {
		return err
	}
	if c.Validate() != nil {
		return fmt.Errorf("%w: %s: not a claim token", dedupe.ErrNotOwner, c.Key)
	}
	argv := make([]any, 0, 1+len(args))
	argv = append(argv, c.Token)
	argv = append(argv, args...)
	n, err := script.Run(ctx, s.client, []string{s.key(c.Key)}, argv...).Int64()
	if err != nil {
		return s.fail(ctx, op, c.Key, err)
	}
	if n != 1 {
		return fmt.Errorf("%w: %s", dedupe.ErrNotOwner, c.Key)
	}
	return nil
}

// Ping checks that the Redis server answers, with one PING. It is meant for
// start-up and health checks; the other methods do not need it.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return dedupe.ErrClosed
	}
	if err := s.client.Ping(ctx).Err(); err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			return fmt.Errorf("dedupe: redis ping: %w (%w)", cerr, err)
		}
		return fmt.Errorf("dedupe: redis ping: %w", err)
	}
	return nil
}

// Backend returns "redis".
func (s *Store) Backend() string { return "redis" }

// Close marks the store closed: later calls return [dedupe.ErrClosed]. It
// closes the client only if the store owns it (see [OpenURL]); a client given
// to [New] stays open. Close is idempotent. Marks and claims stay in Redis
// until they expire.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.ownsClient {
		if err := s.client.Close(); err != nil {
			return fmt.Errorf("dedupe: redis close: %w", err)
		}
	}
	return nil
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
