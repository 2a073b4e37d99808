// Package dedupegotelegram runs each Telegram update that a go-telegram/bot
// bot (github.com/go-telegram/bot) receives once, with a [dedupe.Deduper],
// however often it is delivered: a webhook retry, a second gateway replica
// serving the same bot, a restart that fetches an update again.
//
//	d := dedupe.New(store)
//	b, err := bot.New(token,
//		bot.WithMiddlewares(dedupegotelegram.Middleware(d, "telegram")),
//		bot.WithDefaultHandler(onUpdate))
//	b.Start(ctx)
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
// A go-telegram/bot handler returns nothing, so it decides as a function
// passed to [dedupe.Deduper.Do] that returns nil or panics: an update whose
// handler returned is marked processed; one whose handler panicked is
// released, so that a copy delivered later is processed, and the panic goes
// on (to a recovering middleware placed before this one, if there is one).
// The bot has no channel for the middleware's own verdicts: duplicates and
// copies in flight are dropped, and so is an update whose claim failed in
// the store (the Deduper logs that, see [dedupe.WithLogger], and counts it in
// [dedupe.Deduper.Stats]). A copy that should wait for the outcome of the one
// in flight, and be processed if that one fails, needs [dedupe.WithWait].
//
// This package is a module of its own, github.com/gatewaykit/dedupe/contrib/dedupegotelegram,
// so that only its users download go-telegram/bot.
package dedupegotelegram
