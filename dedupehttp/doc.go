// Package dedupehttp deduplicates chat-platform webhooks in a net/http server
// with a [dedupe.Deduper]: each authentic message reaches the handler once,
// however often the platform redelivers it, a forged one never touches the
// store, and a message whose handler failed is processed when the platform
// retries. ExampleNew, in example_test.go, is the endpoint below, run by go test:
//
//	d := dedupe.New(store) // one Deduper for every platform
//	tg := platform.Telegram.WithSecret(os.Getenv("TELEGRAM_WEBHOOK_SECRET"))
//	http.Handle("POST /telegram", dedupehttp.New(d, tg, telegramHandler))
//
// # Verdicts
//
// [New] reads the body once (up to [WithMaxBodySize], 413 beyond),
// authenticates it with the preset's secret, extracts the message's key and
// runs the handler under [dedupe.Deduper.Do] with the request's context, the
// preset's TTL and its acknowledgement budget:
//
//	forged or stale          401 at once; nothing stored, counted, logged (warn)
//	new message              the handler answers; 2xx: marked processed
//	handler non-2xx, panic   claim released, so the platform's retry is processed
//	duplicate                200 at once (or the first answer: WithReplay)
//	copy in flight           waits up to the preset's AckBudget for the first:
//	                         200 if it was processed, processed itself if the
//	                         first failed, else 503 with Retry-After
//	store error              503 with Retry-After (fail closed; see dedupe.WithFallback)
//	protocol request         passed to the handler (handshakes), or answered
//	                         by the middleware (QQ's URL validation)
//	no message id            passed to the handler undeduplicated, counted and
//	                         logged (warn); 400 with WithRefuseUndeduplicated
//	malformed body           400 Bad Request (configurable: WithExtractError)
//
// Answers the middleware gives itself carry [HeaderVerdict]; the handler
// learns the key and verdict from [KeyFrom]. [Handler.Stats] counts what the
// middleware refused or passed through, the Deduper the rest. A preset
// without a secret, or a custom [Extractor] without [WithVerify], is served
// unauthenticated (with a warning).
//
// # Asynchronous processing
//
// [Async] answers each new message at once with 202 Accepted and a queue id
// ([HeaderQueueID]), and processes it in the background with bounded workers
// and queue. It claims the message first, so duplicates are still answered
// 200 at once; a full queue releases the claim and answers 503 with
// Retry-After: nothing is dropped silently. [Async.Close] stops it and waits
// for its goroutines:
//
//	a := dedupehttp.NewAsync(d.With(dedupe.WithTTL(platform.Slack.TTL)),
//		dedupehttp.FromPreset(platform.Slack), slackHandler,
//		dedupehttp.WithVerify(platform.Slack.WithSecret(signingSecret)),
//		dedupehttp.WithWorkers(4), dedupehttp.WithQueueSize(64))
//	http.Handle("POST /slack", a)
//	// after http.Server.Shutdown:
//	err := a.Close(ctx)
package dedupehttp
