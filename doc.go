// Package dedupe makes a chat-bot or AI-agent gateway process every platform
// message exactly once.
//
// Messaging platforms (Telegram, Slack, Feishu/Lark, Discord, QQ through
// OneBot and the official bot API) deliver webhooks at least once: they retry on
// timeouts, proxies retry on 502 and 504, consumers rebalance, pods restart.
// Without deduplication the AI core answers twice, pays for two model calls, or
// runs an action twice. A gateway imports this package and wraps its dispatch in
// [Deduper.Do].
//
// # Keys
//
// A [Key] names one platform message: a channel (the adapter or platform, such
// as "telegram") and the platform's message id. Its text form is
// "{channel}:{message_id}", the key the NekoBot gateway stores. [ExtractKey]
// finds the id in an adapter's parsed message; [ParseKey] reads the text form.
// Large numeric ids must stay exact: decode JSON with UseNumber, or ExtractKey
// refuses ids that a float64 cannot hold.
//
// # Marks, claims, TTLs and leases
//
// A [Store] holds two kinds of entries. A mark says a message was processed; it
// lasts for a TTL (default 24 h, longer than any platform keeps retrying), after
// which the message counts as new again. A ttl of 0 or less means the store's
// default. A claim says a message is being processed right now; it lasts for a
// lease (default 5 min), after which a copy can claim it again, so a gateway that
// died mid-message does not block that message forever. [Store.Claim] is one
// atomic step: it reports [Duplicate] for a marked key, [InFlight] for a claimed
// one, and otherwise hands out a claim with a token that [Store.Extend] and
// [Store.Release] check. Marking clears any claim.
//
// # Exactly once around dispatch
//
// [Deduper.Do] claims the key, runs the caller's function, and marks the key
// only after the function succeeded, so a failed delivery is released for the
// platform's retry and two concurrent copies never both run. It renews the lease
// while the function runs, counts every verdict ([Deduper.Stats]) and logs them
// with [log/slog].
//
// # Stores
//
// [MemoryStore] (the default) is a sharded LRU with TTLs for one process.
// [SQLiteStore] survives restarts and shares its table with the NekoBot Python
// gateway. The nested modules github.com/gatewaykit/dedupe/redis and
// github.com/gatewaykit/dedupe/postgres are shared by many gateway instances.
// Package dedupetest is the conformance suite every store passes.
//
// # Cross-adapter correlation
//
// One logical message can reach the gateway several times with different ids:
// several bots in one group, or several adapters for one account. A
// [Correlator] recognises such copies by a content fingerprint within a short
// window, marks them as duplicates without dropping them, and lets each handler
// of its [Router] choose whether to see them.
//
// # Gateway kit
//
// Platform presets ([Preset]) know which id to key on and how long each
// platform retries; package dedupehttp is net/http middleware; a [Sequencer]
// hands messages on in order; the nested module
// github.com/gatewaykit/dedupe/prometheus exports the counters.
//
// Every type in this package is safe for concurrent use unless its
// documentation says otherwise.
package dedupe
