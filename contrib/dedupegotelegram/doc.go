// Package dedupegotelegram runs each Telegram update that a go-telegram/bot
// bot (github.com/go-telegram/bot) receives once, with a [dedupe.Deduper],
// however often it is delivered: a second gateway replica serving the same
// bot, a restart that fetches an update again, a webhook request Telegram
// repeats after a network failure.
//
// [Handler] wraps a handler that returns an error:
//
//	d := dedupe.New(store)
//	b, err := bot.New(token, bot.WithErrorsHandler(onError),
//		bot.WithDefaultHandler(dedupegotelegram.Handler(d, "telegram", onUpdate, onError)))
//	b.Start(ctx) // onUpdate(ctx, b, u) returns an error
//
// [Middleware] wraps every handler of a bot, which then fails only by
// panicking:
//
//	b, err := bot.New(token,
//		bot.WithMiddlewares(dedupegotelegram.Middleware(d, "telegram")),
//		bot.WithDefaultHandler(onUpdate))
//
// # Keys
//
// The key of an update is {channel}:{update_id}. Telegram numbers the updates
// of each bot on its own, so two bots that share a store need two channels,
// for example "telegram-support" and "telegram-sales"; one bot served by
// several replicas uses one channel in all of them.
//
// # Verdicts
//
// A handler that succeeds marks its update processed; one that fails (an
// error from a [HandlerFunc], or a panic) releases it. A duplicate is
// dropped. A copy that arrives while another is processed waits for that
// one's outcome, up to [platform.Telegram]'s AckBudget: it is dropped if the
// first succeeded, runs if the first failed, and is dropped if the first is
// still running. Neither a duplicate nor a copy in flight is an error.
//
// # What a release leads to
//
// go-telegram/bot acknowledges an update before its handler runs, in both
// modes, so Telegram never redelivers an update because its handler failed:
//
//   - Polling ([bot.Bot.Start]): its getUpdates loop (get_updates.go) stores
//     each update's id as the last one before handing the update to the
//     workers, and its next call confirms it. A released update is processed
//     again only by a copy waiting for it (see above) or by a process
//     restarted before that next call, which fetches the update again.
//   - Webhook ([bot.Bot.WebhookHandler]): it queues the update for the
//     workers and answers 200 before any handler runs (webhook_handler.go); a
//     released update is never sent again.
//
// A bot whose failed updates must be delivered again takes them over a
// webhook served by package dedupehttp with [platform.Telegram] (and its
// secret token), which answers 200 only after the handler succeeded and 5xx
// otherwise, so that Telegram repeats the request:
//
//	tg := platform.Telegram.WithSecret(os.Getenv("TELEGRAM_WEBHOOK_SECRET"))
//	http.Handle("POST /telegram", dedupehttp.New(d, tg, handler))
//
// This package is a module of its own, github.com/gatewaykit/dedupe/contrib/dedupegotelegram,
// so that only its users download go-telegram/bot.
package dedupegotelegram
