// Package redis is a [dedupe.Store] on Redis, shared by every gateway instance
// that uses the same Redis database: several replicas behind a load balancer,
// the members of a consumer group, or a proxy retrying on another instance all
// see each other's marks and claims, so each platform message is processed
// once.
//
// It is a module of its own (github.com/gatewaykit/dedupe/deduperedis) so that users
// of the root package do not download the Redis client.
//
// # Usage
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
// closes it with the store.
//
// # Keys and values
//
// The message with key k is the Redis string [Config.Prefix] + k.Channel + ":" +
// k.MessageID, for example "dedupe:telegram:123". A mark is the value "m"; a
// claim is "c:" followed by its token, 128 random bits from crypto/rand in hex.
// Every value carries its expiry, so Redis drops expired marks and claims
// itself: the store needs no cleanup. Any other value under a key of the
// prefix is taken for a claim held by someone else.
//
// # Released tokens are fenced
//
// A Claim sent on a connection that was then given up (its caller's deadline
// passed, its reply was lost) may still reach the server, and it may reach it
// after the Release that [dedupe.Deduper] sends on another connection to undo
// it: the two connections keep no order between them. Taking the key then
// would strand the message for a lease. So [Store.Release] fences the token:
// the key keeps the released tokens after its value, space-separated ("r: T1
// T2" once nobody holds it, "c:T3 T1 T2" while another claim does), and a
// Claim with a fenced token takes nothing and is answered [dedupe.InFlight].
// Any other token takes a released key at once. Fences last as long as the
// key's value: the store's lease ([Config.Lease]) after the release, or the
// remaining lease of the claim they sit in; the last eight released tokens of
// a key are kept. A store of an earlier version reads "r:" as a claim held by
// someone else, until it expires: upgrade every instance before relying on
// releases of the new one.
//
// # Expiry is decided by the server
//
// Marks and claims are written with PX (and renewed with PEXPIRE), so the Redis
// server's clock decides when they expire. The gateways' clocks play no part:
// clock skew between gateway hosts cannot make one of them see a mark as
// expired early. Durations are rounded up to whole milliseconds.
//
// # Operations
//
// Every operation is one command touching one key, so the store works on
// Redis Cluster (each key goes to its own slot) as well as on a single server,
// a Ring or a Sentinel-managed primary:
//
//   - Exists is a GET compared with the mark value.
//   - Mark is a SET with PX. It replaces any claim, as the contract says.
//   - Claim is a Lua script that sets the claim with PX if the key is absent
//     or released and otherwise reports what holds it, so "marked"
//     ([dedupe.Duplicate]) and "claimed by another" ([dedupe.InFlight]) are told
//     apart in the same atomic step.
//   - Release and Extend are Lua scripts that compare the claim's token and then
//     fence it or PEXPIRE the key, so a stale claim never drops or renews
//     another's.
//
// Scripts run with EVALSHA, and with EVAL when the server has not cached them
// (the first call after a start, a restart or a SCRIPT FLUSH), which loads
// them. They need nothing newer than Redis 2.6.12.
//
// # Batching
//
// A [Store] sends the commands of concurrent calls together (natural
// batching, or group commit): a call that finds a pipeline free is sent at
// once, by its own goroutine, with no timer; the calls that arrive while eight
// pipelines are in flight wait, and the next pipeline sends them all, up to
// 128. A pipeline is one round trip on one connection of the client's pool,
// or on a ClusterClient one per node holding its keys, sent at once. So a lone
// caller waits one round trip, as without batching, and 64 concurrent callers
// share a few round trips instead of making 64.
//
// Each call waits for its own command's reply and gets its own result and
// error: the commands of a pipeline are not a transaction, and a command that
// fails fails only its own call. An EVALSHA the server answers NOSCRIPT is
// sent again by EVAL in a second round trip. A connection that fails fails the
// calls of its pipeline, each with the error; their commands may have run
// (see Failures).
//
// A call whose context ends while it waits for a pipeline returns the
// context's error at once and is never sent; one whose context ends while its
// pipeline is in flight returns the context's error too, and its command may
// still run. A pipeline's read is bounded by the latest deadline of its
// callers' contexts (set [redis.Options.ContextTimeoutEnabled]) and by the
// client's ReadTimeout. [Store.Close] answers the calls still waiting with
// [dedupe.ErrClosed] and waits for the pipelines in flight; the store runs no
// goroutine after that, and none while it is idle.
//
// # Failures
//
// A Redis error (connection refused or cut, timeout, server restart) is
// returned wrapped; it is never turned into a status. In particular a claim is
// never reported [dedupe.Duplicate] unless Redis holds a mark for its key. A
// Claim that fails may still have taken the key on the server: Claim again
// with the same token (a claim that recognises its own token is still
// [dedupe.Claimed]) or Release it, as [dedupe.Deduper] does, and nothing stays
// in flight. Once the server answers again the same Store works again: nothing
// needs re-creating.
//
// Give [dedupe.New] the option [dedupe.WithFallback] to keep processing on a
// local store during an outage; without it the Deduper fails closed and the
// platform retries the delivery later.
//
// Marks last as long as Redis keeps its data: a Redis without persistence
// (RDB or AOF) forgets every mark when it restarts, and messages redelivered
// after that are processed again. Where that matters, run Redis with
// appendonly yes: appendfsync always keeps every acknowledged mark through a
// crash, everysec may lose the last second's. A failover to a replica may
// likewise lose the marks not yet replicated.
//
// # Concurrency and ownership
//
// A [Store] is safe for concurrent use. It does not own a client given to
// [New] and never closes it; it owns and closes the client made by [OpenURL].
// Errors are matched with [errors.Is] against the sentinels of package dedupe:
// [dedupe.ErrInvalidKey] (checked before any I/O), [dedupe.ErrNotOwner] and
// [dedupe.ErrClosed], and against [context.Canceled] and
// [context.DeadlineExceeded].
package deduperedis
