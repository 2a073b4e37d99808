// Package deduperedis is a [dedupe.Store] on Redis, shared by every gateway instance
// that uses the same Redis database: several replicas behind a load balancer,
// the members of a consumer group, or a proxy retrying on another instance all
// see each other's marks and claims, so each platform message is processed
// once. It also holds [Queue], a durable work queue on a Redis stream for
// the Async of package dedupehttp.
//
// It is a module of its own (github.com/gatewaykit/dedupe/deduperedis) so that users
// of the root package do not download the Redis client.
//
// # Usage
//
// Make a client with ContextTimeoutEnabled, give it to [New], and give the
// store to [dedupe.New], with a local fallback for Redis outages. The
// package's Example, in example_test.go, is this program, compiled by go test:
//
//	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
//	defer client.Close()
//	store, err := deduperedis.New(client, deduperedis.Config{TTL: 24 * time.Hour})
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//	d := dedupe.New(store, dedupe.WithFallback(dedupe.NewMemoryStore(dedupe.MemoryConfig{})))
//	err = d.Do(ctx, key, dispatch) // dedupe.ErrDuplicate, dedupe.ErrInFlight, dispatch's error, or nil
//
// [OpenURL] makes the client from a URL such as "redis://127.0.0.1:6379/0" and
// closes it with the store; a URL naming several nodes with addr=
// ("redis://10.0.0.1:6379?addr=10.0.0.2:6379") makes a Redis Cluster client,
// as does [OpenClusterURL]. [NewQueue] opens the queue.
//
// Every operation is one command on one key, and the Redis server's clock
// decides expiry, so the store works on a single server, Sentinel, a Ring or
// Redis Cluster, and the gateways' clocks play no part (but for the marks of
// the compact layout, below); Redis drops expired
// keys itself, so the store needs no cleanup. Concurrent calls share pipelines:
// a lone caller waits one round trip, 64 concurrent callers share a few. How it
// works (keys and values, the Lua scripts, the fencing of released tokens,
// batching, failover) is in docs/internals-redis.md in the repository.
//
// # Results
//
// [dedupe.Deduper.DoResult] on a [Store] keeps a
// handler's result, up to [dedupe.MaxResultSize] bytes, with the message's
// mark, and hands it to every copy of the message, on any instance. The
// result is in the mark's own Redis string, so it is written by the mark's
// SET (batched and confirmed by [Config.Replicas] as a mark is) and expires
// with it. A store of an earlier version takes a mark kept with a result for
// a claim held by someone else until it expires: upgrade every instance
// before any of them calls DoResult.
//
// # Compact layout
//
// With [Config.Compact] a mark is an 8-byte fingerprint of its key, with its
// expiry, in one of [Config.Shards] small hashes, which Redis keeps in its
// compact listpack encoding: about 25 bytes a mark instead of 145 for the
// plain layout's string per mark. Each call is still one round trip on keys
// of one hash slot: Exists one HGET, Claim a SET NX GET and an HGET, Mark
// an HSET, an HLEN and a DEL (and, now and then, the bucket's PEXPIREAT),
// about as fast as the plain layout at 64 callers (0.9×). Its marks expire by the
// gateways' clocks, not the server's: keep them in sync (NTP). It cannot
// list its marks ([Store.ListMarks] fails with an error wrapping
// [errors.ErrUnsupported]); it is opt-in. docs/internals-redis.md, "Compact
// layout", has the keys, why the commands need no script, the sizing of
// Shards and the probability of a false duplicate.
//
// # Layout record
//
// Every store of a prefix must use one layout: plain, or compact with one
// [Config.Shards]. The prefix records it in one key that never expires,
// Prefix + "layout" ("format=1 layout=compact shards=4096"), written with
// SET NX by the first store that opens the prefix. A store checks the record
// before its first call reaches the server (call [Store.Ping] at start-up),
// and again at most every minute, which writes back a record lost by
// FLUSHALL or a failover; a store configured otherwise fails every call with
// an error wrapping [ErrLayoutMismatch] that names both layouts. A prefix
// without a record, written by an earlier version, is not refused for it:
// the store records its own layout, unless one page of SCAN over the prefix
// finds keys of the other layout only. [Config.AdoptLayout] takes the
// recorded layout instead, as the dedupe command does. docs/internals-redis.md,
// "Layout record", has the details.
//
// # Failures
//
// A Redis error (connection refused or cut, timeout, server restart) is
// returned wrapped; it is never turned into a status. In particular a claim is
// never reported [dedupe.Duplicate] unless Redis holds a mark for its key. A
// Claim that fails may still have taken the key on the server: Claim again
// with the same token or Release it, as [dedupe.Deduper] does, and nothing
// stays in flight. Once the server answers again the same Store works again:
// nothing needs re-creating.
//
// Give [dedupe.New] the option [dedupe.WithFallback] to keep processing on a
// local store during an outage; without it the Deduper fails closed and the
// platform retries the delivery later.
//
// # Durability
//
// Marks last as long as Redis keeps its data: a Redis without persistence
// forgets every mark when it restarts, and messages redelivered after that
// are processed again; run it with appendonly yes where that matters. Redis
// replicates asynchronously, so a failover to a replica loses the writes it
// had not received (200 of 200 acknowledged marks in a test here).
// [Config.Replicas] = N acknowledges a Mark or a Claim only once N replicas
// have it, and otherwise fails with an error wrapping [ErrNotReplicated],
// which [dedupe.Deduper] treats as ambiguous.
//
// # Redis Cluster
//
// Give [New] a [*redis.ClusterClient], or open one with [OpenClusterURL]
// (ExampleNew_cluster shows the options). Set ContextTimeoutEnabled;
// ClusterStateReloadInterval of a few seconds ([OpenClusterURL] sets 5 s);
// DialTimeout of about a second; ReadTimeout above [Config.ReplicaTimeout];
// and a lease ([Config.Lease]) that outlasts the longest failover expected.
// The store batches per master, so a stalled master delays only the keys it
// owns, and retries a call while its slot moves, for up to
// [Config.ClusterRetry]. A hash tag in [Config.Prefix] ("dedupe:{gw}:") puts
// every key in one slot.
//
// # Concurrency and ownership
//
// A [Store] is safe for concurrent use. It does not own a client given to
// [New] and never closes it; it owns and closes the client made by [OpenURL].
// [Store.Close] answers the calls still waiting with [dedupe.ErrClosed]; the
// store runs no goroutine after that, and none while it is idle. Errors are
// matched with [errors.Is] against the sentinels of package dedupe:
// [dedupe.ErrInvalidKey] (checked before any I/O), [dedupe.ErrNotOwner] and
// [dedupe.ErrClosed], and against [context.Canceled] and
// [context.DeadlineExceeded].
package deduperedis
