// Package dedupelog shapes the log records of a [dedupe.Deduper] for a log
// pipeline: the level of its decision records, sampling of the duplicates
// among them, and masking of the fields that can hold user data. Each is a
// [slog.Handler] wrapping another, given to [dedupe.WithLogger]:
//
//	h := slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
//	h = dedupelog.Mask(h, dedupelog.Hash, secret)   // message ids as keyed hashes
//	h = dedupelog.SampleDuplicates(h, 100)          // 1 duplicate record in 100
//	h = dedupelog.Level(h, slog.LevelInfo)          // decision records at info
//	d := dedupe.New(store, dedupe.WithLogger(slog.New(h)))
//
// # The decision record
//
// Each call of [dedupe.Deduper.Do] that gets past the key's validation logs
// one record, with the message [Decision], at debug level, with these fields
// in this order:
//
//	trace_id         the trace id of ctx (dedupe.WithTraceID; "" if none)
//	platform         the key's channel, such as "telegram"
//	message_id       the key's message id, such as "123456789"
//	dedup_phase      what decided: the LayeredStore layer ("transport",
//	                 "business"; "transport1", … with more layers), "fallback" when WithFallback's
//	                 local store served alone, "backlog" for a copy whose mark
//	                 is queued, or else the primary store's backend ("memory",
//	                 "sqlite", "redis", "postgres", "layered")
//	processing_time  how long Do took up to the decision (a duration)
//	result           processed, duplicate, in_flight, failed, store_error,
//	                 abandoned (fn failed after its lease was lost) or
//	                 payload_mismatch (a copy whose payload differs from
//	                 the processed one's: dedupe.WithPayloadCheck)
//
// Besides it, the Deduper logs at warn level the store errors and the lost
// leases, with the fields key ("{platform}:{message_id}"), backend, phase,
// trace_id, error and sometimes layer, store, lease.
//
// # Fields that can hold user data
//
// A message id is the platform's (a Telegram update id, a Slack event id, a
// OneBot "{self_id}:{message_id}" holding the bot's account number) or the
// caller's own, and can identify a user or a conversation. These fields of
// the records of the Deduper and of dedupehttp, and attributes of the spans
// of dedupeotel, can hold it; [Fields] returns the list, the one a [Masker]
// reads, and [Mask] (for records) and dedupeotel's WithMask (for spans) hide
// them:
//
//	message_id            the message id
//	key                   "{platform}:{message_id}"
//	error                 an error's text can quote the key or the id
//	err                   reply: the same (and many programs' name for it)
//	mark_error            dedupehttp: the error of the mark after a handler
//	                      panicked having answered; its text quotes the key
//	panic                 dedupehttp: a handler's panic value, as text
//	messaging.message.id  dedupeotel: the message id
//	exception.message     dedupeotel: a recorded error's text (and the span's
//	                      status description)
//
// platform is the channel the gateway configured ("telegram"), trace_id is
// the tracing system's; neither comes from a user. The Deduper never logs a
// message's body, its sender or its chat. A field added to a record or a
// span that can hold an id belongs in the list.
//
// [Mask] finds the message a record is about in its fields platform,
// message_id and key, or else in the attributes bound to its logger
// ([slog.Logger.With], as package reply binds a reply's key), which it masks
// when they are bound; a field is found at any depth of groups. An error
// wrapping [dedupe.ErrInvalidKey] or [dedupe.ErrNoMessageID] quotes a value
// that could not become a key, which no field names: its text is replaced by
// the sentinel's ([Masker.Error]) in every record.
//
// The handlers are safe for concurrent use, as the handlers they wrap are.
package dedupelog
