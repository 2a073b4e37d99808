// Package dedupetelebot runs each Telegram update that a telebot bot
// (gopkg.in/telebot.v3) receives once, with a [dedupe.Deduper], however often
// it is delivered: a webhook retry, a second gateway replica polling or
// serving the same bot, a restart that fetches an update again.
//
//	d := dedupe.New(store)
//	b, _ := tele.NewBot(tele.Settings{Token: token, Poller: &tele.LongPoller{}})
//	b.Use(dedupetelebot.Middleware(d, "telegram"))
//	b.Handle(tele.OnText, onText)
//	b.Start()
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
// The handler's result decides as in [dedupe.Deduper.Do]: nil marks the
// update processed, an error (or a panic) releases it, so that a copy
// delivered later is processed. A duplicate is dropped and the middleware
// returns nil; a copy that arrives while another is processed returns
// [dedupe.ErrInFlight], to the bot's OnError, unless the Deduper waits for
// the owner's outcome ([dedupe.WithWait]).
//
// This package is a module of its own, github.com/gatewaykit/dedupe/contrib/dedupetelebot,
// so that only its users download telebot.
package dedupetelebot
