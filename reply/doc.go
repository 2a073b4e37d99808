// Package reply sends a processed message's replies to the platform once,
// keeping a record of each send in a [dedupe.Store], so that a redelivery, a
// retry or a restart does not answer a user twice, and a send whose outcome
// is unknown (a timeout, a 5xx after the platform accepted the message, a
// crash) is handled by a stated policy rather than by chance.
//
// Package dedupe makes the way in exactly once: [dedupe.Deduper.Do] runs a
// message's handler once. The way out is the reply, and a reply can still go
// out twice: the send times out after the platform accepted it and the
// gateway sends again, or the process dies between the send and the
// message's mark and the redelivered message is answered again. A [Sender]
// closes that gap:
//
//	s := reply.New(store, reply.LINE, reply.WithLogger(logger))
//	r, err := s.Send(ctx, key, 0, composeAnswer, func(ctx context.Context, m reply.Message) (string, error) {
//		return pushWithRetryKey(ctx, m.Token, m.Body) // X-Line-Retry-Key: m.Token
//	})
//
// # Records and slots
//
// A message (a [dedupe.Key]) can have several replies, numbered densely from
// 0: its slots. Each reply has a record, kept as the result of a mark
// ([dedupe.Store.MarkResult]) under the key
// {Channel: "dedupe.reply", MessageID: "{channel}:{message_id}#{slot}"}
// ("h:" and the hex SHA-256 of that id when it is longer than 256 bytes),
// for [WithTTL] (default [dedupe.DefaultTTL], never less than the platform's
// window). So the records live in every store: memory, SQLite, Redis,
// PostgreSQL, layered. A record holds the reply's state, the number of sends
// so far, when the current series of sends began, when the first send (a
// refused one included) was made, the platform's message id once sent, and
// the body, in a small versioned encoding. The body is
// composed once, recorded before the first send, and sent byte for byte on
// every later send. A record that cannot be read is an error
// ([ErrBadRecord]): never a panic, never a send. So is a record whose mark a
// store kept without its result: the memory store bounds the bytes of
// results it holds ([dedupe.MemoryConfig].MaxResultBytes), and a reply
// whose record lost its body is reported, not sent blind; size the bound for
// the replies of one TTL.
//
// [Sender.Send] handles one reply at a time under a lock, a
// [dedupe.Store.Claim] of the key {Channel: "dedupe.reply-lock"} with the
// same id, renewed while Send runs ([WithLease]) and released when Send
// returns: a copy running in another goroutine or process meanwhile gets
// [dedupe.ErrInFlight].
//
// # Tokens and policies
//
// A reply's token is derived from its message's key and its slot ([UUID],
// [Nonce]): the same in every process, run and retry. Where the platform
// honours a token (LINE's X-Line-Retry-Key, Discord's nonce with
// enforce_nonce, Feishu's uuid), a send again with the same token is dropped
// by the platform if the first one was accepted: such a reply is sent
// exactly once ([Native]), as long as the send again falls within the
// platform's window. Where it has none (Telegram, Slack), the caller
// chooses: [AtMostOnce] reports a reply whose outcome is unknown as possibly
// lost ([ErrMaybeLost]) and never sends it again, [AtLeastOnce] sends it
// again and reports it as a possible duplicate ([Receipt].MaybeDuplicate). A
// read-back ([WithCheck]), where the platform offers one, decides for the
// policy. A send the platform refused before accepting the message
// ([NotSent]) is sent again under any policy. [Platform] holds a platform's
// policy, window and token format; [LINE], [Discord], [Feishu], [WeCom],
// [Telegram] and [Slack] are presets quoting each platform's documentation.
//
// # The outbox path
//
// On SQLite and PostgreSQL, a handler that commits its effect in a
// transaction with the message's mark ([dedupe.SQLiteStore.DoTx], the
// postgres module's DoTx) can record its replies in the same transaction
// with [IntendTx]: the replies are then intended if and only if the effect
// committed. After the commit, [Sender.Flush] sends them. A process killed
// after the commit and before the sends leaves the replies recorded: the
// platform redelivers the message, DoTx answers [dedupe.ErrDuplicate], and
// the caller calls Flush, which sends what is not yet sent. A store whose
// marks can be written in a transaction is a [TxStore].
//
// A Sender is safe for concurrent use. It starts no goroutine and holds no
// resource: it needs no Close.
package reply
