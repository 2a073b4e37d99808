// Package deduperedis is a [dedupe.Store] on Redis, shared by every gateway instance
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
// closes it with the store; a URL naming several nodes with addr=
// ("redis://10.0.0.1:6379?addr=10.0.0.2:6379") makes a Redis Cluster client,
// as does [OpenClusterURL].
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
// 128. A pipeline is one round trip on one connection of the client's pool.
// On a ClusterClient the store batches per master: each master has its own
// pipelines and queue (see Redis Cluster). So a lone
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
// likewise lose the marks not yet replicated: see Durability.
//
// # Durability
//
// Redis replicates asynchronously: the master answers a write before any
// replica has it. With the default [Config], a Mark or a Claim is
// acknowledged once the master applied it, and a failover (a master killed,
// its replica promoted, on Redis Cluster or under Sentinel) loses every write
// the replica had not received: the marks of messages already processed,
// which then run again when they are redelivered, and claims, which another
// instance may then take while the first still processes the message. On
// this machine, with the replica's link cut and the master then killed, 200
// of 200 acknowledged marks were lost.
//
// [Config.Replicas] = N makes the store end each round trip that holds a Mark,
// or a Claim that took its key, with WAIT N [Config.ReplicaTimeout] on the same
// connection: the call is acknowledged only once N replicas have the write,
// and otherwise fails with an error wrapping [ErrNotReplicated]. That error
// is ambiguous (the master applied the write; a failover may or may not keep
// it), and [dedupe.Deduper] treats it so: it retries the Mark and releases the
// Claim. A failover to a replica that confirmed the write keeps it; with
// Replicas 1 and the replica cut off, no acknowledged mark was lost (0 of 0
// acknowledged, 100 refused). It does not make Redis a consensus system: a
// failover to a replica that did not confirm (one of several, when N is less
// than the replicas) still loses the write, and appendfsync decides what a
// crash of every copy loses. A shard whose replicas are all down refuses every
// Mark and Claim until one is back. Each confirmed round trip waits for a
// replica's acknowledgement: BenchmarkClusterClaimMark measures the cost.
//
// The server option min-replicas-to-write N (with min-replicas-max-lag) is
// not the same thing: the master refuses writes (NOREPLICAS) while fewer than
// N replicas were in touch within the lag, but a write it accepts is still
// acknowledged before any replica has it, and the refusals start only once
// the lag has passed: writes acknowledged in that window are lost by a
// failover as without it. It bounds the loss to min-replicas-max-lag seconds;
// Replicas bounds it to nothing acknowledged.
//
// # Redis Cluster
//
// Give [New] a [*redis.ClusterClient], or open one with [OpenClusterURL]. Each
// operation touches one key, so any key layout works; a hash tag in
// [Config.Prefix] ("dedupe:{gw}:") puts every key in one slot.
//
// Per-master batches. A go-redis cluster pipeline is split by node and
// returns when every node answered, so one stalled master would delay the
// calls of all. The store keeps a batcher per master instead (found with
// ClusterClient.MasterForKey from the client's slot map) and sends each
// pipeline straight to that master: a stalled master delays only the keys it
// owns. With one master stopped (SIGSTOP) for 4 s and 1 s deadlines, no call
// on the keys of the other masters failed (TestClusterStall).
//
// Recovery after a node dies. go-redis learns where a slot went from a MOVED
// reply, and otherwise reloads its slot map every
// ClusterOptions.ClusterStateReloadInterval, 60 s by default; a dead master
// answers nothing. So on a connection error, a timeout, CLUSTERDOWN,
// TRYAGAIN, MOVED, ASK, LOADING, READONLY or MASTERDOWN the store has the
// client reload its slot map (ClusterClient.ReloadState, at most every 250 ms)
// and sends the call again after a backoff (20 ms doubling to 500 ms), for up
// to [Config.ClusterRetry] (12 s by default) and never past the call's
// context. Every operation is safe to send again: a Claim recognises its own
// token, a Mark is a SET, an Extend a PEXPIRE, and a Release that finds its
// claim gone returns [dedupe.ErrNotOwner]. A call on a slot being migrated
// (ASK) is sent alone through the ClusterClient, which follows the
// redirection; a store with Replicas set retries it instead until the slot
// has moved, as its WAIT must follow the command on the same connection. On
// this machine (cluster-node-timeout 5000, SIGKILL of a master under load, 1
// s deadlines) calls on the dead master's keys failed until its replica was
// promoted, the last 8.0–9.1 s after the kill, with 128–144 calls failed in
// all (three runs; the same failover cost 5,500 errors over ~56 s before),
// and no message ran twice (TestClusterKillFailover). Calls are lost only while no node serves
// the slot: about cluster-node-timeout plus the election.
//
// The client's options that matter ([ExampleNew_cluster]):
// ContextTimeoutEnabled, so that the callers' deadlines bound calls in
// flight; ClusterStateReloadInterval of a few seconds, so that a slot map
// changed without any call failing (a manual failover, a resharding) is
// learnt soon ([OpenClusterURL] sets 5 s); DialTimeout of about a second, so
// that a call to a dead host fails fast and is retried on the new master
// (with 5 s, the default, one dial outlasts most deadlines); ReadTimeout above
// [Config.ReplicaTimeout]. The lease ([Config.Lease]) should outlast the
// longest failover expected: a claim is not renewed while its slot has no
// master.
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
