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
// Redis Cluster, and the gateways' clocks play no part (but for when the
// marks of the compact layout end, below); Redis drops expired
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
// compact listpack encoding: about a sixth of the memory of the plain
// layout's string per mark (docs/sizing.md has the figures). Each call is still one round trip on keys
// of one hash slot: Exists one HGET, Claim a SET NX GET and an HGET, Mark
// an HSET, an HLEN, a PTTL and a DEL (and, now and then, the bucket's
// PEXPIRE), near the plain layout's speed (docs/performance.md). It needs Redis
// 6.2 or later; on a server before 7.0, which refuses SET NX GET and
// PEXPIRE GT, the store finds so from the refusal and runs a script for
// each call from then on.
//
// Which clock decides what: when a mark ends, to the millisecond, is
// decided by the clock of the gateway that reads it (the mark holds the
// writing gateway's time plus its TTL), so keep the gateways' clocks in
// sync (NTP): gateways whose clocks differ by d see a mark end up to d
// apart. The server's clock decides only durations: how long a bucket, a
// result kept with a mark and a claim stay in Redis. The store sends it no
// absolute time, only the TTL a mark has left on the gateway's clock, and
// a bucket's expiry is only ever lengthened, to its latest mark's at
// least, whatever happened to it (a Forget that emptied it, FLUSHALL, a
// restart, stores of one prefix with other TTLs); so a server clock ahead
// of or behind the gateways' does not end a mark early.
//
// It cannot list its marks ([Store.ListMarks] fails with an error wrapping
// [errors.ErrUnsupported]); it is opt-in. docs/internals-redis.md, "Compact
// layout", has the keys, why the commands need no script, the expiry rule,
// the sizing of Shards and the probability of a false duplicate.
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
// # Commands sent again
//
// go-redis sends a command again by itself when its connection failed
// before the reply came (redis.Options.MaxRetries, 3 by default), so a reply
// lost after the server ran a command makes the server run it twice. The
// store and the [Queue] leave the client's retries on (turned off, each cut
// connection would be an error for the caller) and make every call safe to
// run twice: a Claim run again with its token finds its own claim and renews
// it; Mark and Extend set what they set; a Release run again finds its token
// fenced and answers [dedupe.ErrNotOwner] (which [dedupe.Deduper] only
// logs). A push run again finds its message and reports it added; a take run
// again hands out the entry its first run took, with the same attempt; an
// update run again finds itself applied, or its receipt spent
// ([queue.ErrStaleDelivery]).
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
