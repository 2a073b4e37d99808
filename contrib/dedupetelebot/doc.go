// Package dedupetelebot runs each Telegram update that a telebot bot
// (gopkg.in/telebot.v3) receives once, with a [dedupe.Deduper], however often
// it is delivered: a second gateway replica polling or serving the same bot,
// a restart that fetches an update again, a webhook request Telegram repeats
// after a network failure.
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
// update processed, an error (or a panic) releases it. A duplicate is dropped
// and the middleware returns nil. A copy that arrives while another is
// processed waits for that one's outcome, up to [platform.Telegram]'s
// AckBudget: it is dropped if the first succeeded, runs if the first failed,
// and is dropped (nil, not an error for OnError) if the first is still
// running.
//
// # What a release leads to
//
// telebot acknowledges an update before its handler runs, in both modes, so
// Telegram never redelivers an update because its handler failed:
//
//   - Polling: [tele.LongPoller.Poll] moves its offset past each update as it
//     hands it to the bot, and its next getUpdates call confirms it. A
//     released update is processed again only by a copy waiting for it (see
//     above) or by a process restarted before that next call, which fetches
//     the update again.
//   - Webhook: [tele.Webhook.ServeHTTP] queues the update and answers 200
//     before any handler runs; a released update is never sent again.
//
// A bot whose failed updates must be delivered again takes them over a
// webhook served by package dedupehttp with [platform.Telegram] (and its
// secret token), which answers 200 only after the handler succeeded and 5xx
// otherwise, so that Telegram repeats the request:
//
//	tg := platform.Telegram.WithSecret(os.Getenv("TELEGRAM_WEBHOOK_SECRET"))
//	http.Handle("POST /telegram", dedupehttp.New(d, tg, handler))
//
// This package is a module of its own, github.com/gatewaykit/dedupe/contrib/dedupetelebot,
// so that only its users download telebot.
package dedupetelebot
