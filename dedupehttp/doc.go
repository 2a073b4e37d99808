// Package dedupehttp deduplicates chat-platform webhooks in a net/http server
// with a [dedupe.Deduper]: each message reaches the handler once, however
// often the platform redelivers it, and a message whose handler failed is
// processed when the platform retries.
//
//	d := dedupe.New(store, dedupe.WithTTL(platform.Telegram.TTL))
//	mw := dedupehttp.Middleware(d, dedupehttp.FromPreset(platform.Telegram))
//	http.Handle("POST /telegram", mw(telegramHandler))
//
// # Verdicts
//
// [Middleware] reads the body once (up to [WithMaxBodySize], 413 beyond),
// extracts the message's key with an [Extractor], such as one made by
// [FromPreset], and runs the handler under [dedupe.Deduper.Do] with the
// request's context:
//
//	new message            the handler answers; 2xx-4xx: marked processed
//	handler 5xx or panic   claim released, so the platform's retry is processed
//	duplicate              200 at once, the handler is not called
//	copy in flight         200 at once (configurable: WithInFlight)
//	store error            503 with Retry-After (fail closed; see dedupe.WithFallback)
//	no message id          passed to the handler without deduplication (handshakes)
//	malformed body         400 Bad Request (configurable: WithExtractError)
//
// Answers the middleware gives itself carry the [HeaderVerdict] header.
//
// # Asynchronous processing
//
// [Async] answers each new message at once with 202 Accepted and a queue id
// in the [HeaderQueueID] header, and processes it in the background with a
// bounded number of workers and a bounded queue. It claims the message before
// queuing it, so duplicates are still answered 200 at once; when the queue is
// full it releases the claim and answers 503 with Retry-After, so that nothing
// is dropped silently. [Async.Close] stops it and waits for its goroutines:
//
//	a := dedupehttp.NewAsync(d, dedupehttp.FromPreset(platform.Slack), slackHandler,
//		dedupehttp.WithWorkers(4), dedupehttp.WithQueueSize(64))
//	http.Handle("POST /slack", a)
//	// after http.Server.Shutdown:
//	err := a.Close(ctx)
//
// This package uses only the standard library besides the root package and
// package platform, whose presets [FromPreset] takes.
package dedupehttp
