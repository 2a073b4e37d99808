// Package dedupetgbotapi runs each Telegram update that a go-telegram-bot-api
// bot (github.com/go-telegram-bot-api/telegram-bot-api/v5) receives once, with
// a [dedupe.Deduper], however often it is delivered: a webhook retry, a second
// gateway replica serving the same bot, a restart that fetches updates again
// because the last offset was never confirmed.
//
//	d := dedupe.New(store)
//	handle := dedupetgbotapi.Handler(d, "telegram", onUpdate)
//	for u := range api.GetUpdatesChan(tgbotapi.NewUpdate(0)) {
//		go handle(ctx, u) // onUpdate(ctx, u) returns an error
//	}
//
// The SDK hands updates over a channel, which cannot tell when an update was
// processed; so the unit wrapped is the function that processes one update, a
// [HandlerFunc], and the result it returns decides as in
// [dedupe.Deduper.Do]: nil marks the update processed, an error (or a panic)
// releases it, so that a copy delivered later is processed. Behind a webhook
// ([tgbotapi.BotAPI.HandleUpdate]), answer an error with a 5xx status so that
// Telegram delivers the update again.
//
// # Keys
//
// The key of an update is {channel}:{update_id}. Telegram numbers the updates
// of each bot on its own, so two bots that share a store need two channels,
// for example "telegram-support" and "telegram-sales"; one bot served by
// several replicas uses one channel in all of them.
//
// This package is a module of its own, github.com/gatewaykit/dedupe/contrib/dedupetgbotapi,
// so that only its users download go-telegram-bot-api.
package dedupetgbotapi
