// Package dedupeotel traces a [dedupe.Deduper] and the dedupehttp webhook
// middleware with OpenTelemetry. It is a module of its own, so that the root
// module never downloads the OpenTelemetry SDK.
//
// It is built as go-redis's redisotel and otelhttp are: wrappers that start a
// span around each call of what they wrap, with a tracer from a
// [trace.TracerProvider] ([WithTracerProvider], by default the global one)
// and attributes named by the OpenTelemetry semantic conventions where they
// have a name (messaging.system, messaging.message.id, db.system.name,
// db.operation.name, error.type, http.*), and dedupe.* otherwise:
//
//	st := dedupeotel.NewStore(store)                  // a span per store call
//	d := dedupe.New(st, dedupe.WithTraceID(dedupeotel.TraceID))
//	td := dedupeotel.NewDeduper(d)                    // a span per Do
//	err := td.Do(ctx, key, process)
//
// A gateway behind the dedupehttp middleware gets a span per delivery:
//
//	h := dedupehttp.New(d, tg, dedupeotel.Annotate(telegramHandler))
//	http.Handle("POST /telegram", dedupeotel.Handler(h))
//
// # Spans
//
//	dedupe.Do or "POST /telegram"   dedupe.verdict, messaging.system, messaging.message.id
//	├── dedupe.claim               dedupe.claim.status (in_flight)
//	├── dedupe.wait                dedupe.wait.result, dedupe.wait.polls, when the Deduper waits (dedupe.WithWait)
//	│   └── dedupe.claim           the last claim of the wait: claimed, duplicate, or in_flight
//	├── (fn's own spans)
//	├── dedupe.extend              each lease renewal
//	└── dedupe.mark or dedupe.release
//
// A batch ([Deduper.DoEach]) is one span, and each message whose fn ran a
// child of it; the messages that did not run are counted, not spanned:
//
//	dedupe.DoEach                  messaging.batch.message_count, dedupe.batch.processed_count, ...
//	├── dedupe.ClaimEach           db.operation.batch.size, dedupe.batch.claimed_count, ...
//	├── dedupe.process             dedupe.verdict, messaging.message.id: one per message run
//	│   └── (fn's own spans)
//	├── dedupe.ExtendEach          the leases of the batch, renewed together
//	└── dedupe.MarkEach or dedupe.ReleaseEach
//
// A batch's wait for the keys other callers hold ([dedupe.WithWait]) is not
// folded into one span as a Do's is: each ClaimEach it asks again is a span
// of the batch's.
//
// The wait is derived from the claims, since the Deduper has no hook of its
// own: it starts when a claim under the Do's span finds the copy in flight,
// and shows once a second claim is asked (a wait shorter than the first
// backoff, 5 ms, is not shown). However long the wait (a copy waiting out
// Telegram's 40 s budget asks about 160 times), it is one span: it counts
// the claims asked (dedupe.wait.polls), and only the last is a span.
//
// Every root span names its message (messaging.system, messaging.message.id),
// and a delivery's dedupe.verdict is the result of its decision record, as a
// Do's is.
//
// # Trace ids in the logs
//
// [TraceID] reads the trace id of the span a context carries, and the one
// of [dedupe.ContextWithTraceID] otherwise; given to [dedupe.WithTraceID] it
// puts the OpenTelemetry trace id in the Deduper's log records. A gateway
// without OpenTelemetry keeps using ContextWithTraceID.
//
// A message id can identify a user or a conversation: [WithMask] hides it in
// the spans as [dedupelog.Mask] does in the log records, with one rule and
// one list of fields ([dedupelog.Fields]); [WithoutMessageID] leaves it out
// (docs/observability.md lists the fields).
package dedupeotel
