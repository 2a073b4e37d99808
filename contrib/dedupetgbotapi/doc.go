// Package dedupetgbotapi runs each Telegram update that a go-telegram-bot-api
// bot (github.com/go-telegram-bot-api/telegram-bot-api/v5) receives once, with
// a [dedupe.Deduper], however often it is delivered: a webhook retry, a second
// gateway replica serving the same bot, a restart that fetches updates again
// because the last offset was never confirmed.
//
//	d := dedupe.New(store)
//	handle := dedupetgbotapi.Handler(d, "telegram", onUpdate)
//	for u := range api.GetUpdatesChan(tgbotapi.NewUpdate(0)) {
//		go func() {
//			if err := handle(ctx, u); err != nil && !errors.Is(err, dedupe.ErrInFlight) {
//				log.Printf("update %d: %v", u.UpdateID, err)
//			}
//		}()
//	}
//
// The SDK hands updates over a channel, which cannot tell when an update was
// processed; so the unit wrapped is the function that processes one update, a
// [HandlerFunc], and the result it returns decides as in
// [dedupe.Deduper.Do]: nil marks the update processed, an error (or a panic)
// releases it. A copy that arrives while another is processed waits for that
// one's outcome, up to [platform.Telegram]'s AckBudget: it is dropped if the
// first succeeded, runs if the first failed, and returns
// [dedupe.ErrInFlight], which is not a failure, if the first is still
// running.
//
// # What a release leads to
//
// Whether Telegram delivers a released update again depends on how the bot
// receives it:
//
//   - Polling ([tgbotapi.BotAPI.GetUpdatesChan]): it moves its offset past
//     each update before sending it on the channel, and its next getUpdates
//     call confirms it. A released update is processed again only by a copy
//     waiting for it, or by a process restarted before that next call, which
//     fetches the update again.
//   - Polling with [Poll] and a [Batch]: each getUpdates batch (up to 100
//     updates) runs through [dedupe.Deduper.DoEach], one claim round trip
//     for the batch, and the next call's offset confirms only the updates
//     processed or found processed, up to the first that failed. The
//     failed update is fetched again with those after it, which are
//     dropped as duplicates, so it is processed again, by this process or
//     the next.
//   - [tgbotapi.BotAPI.ListenForWebhook]: it answers 200 once the update is
//     on the channel, before it is processed; a released update is never sent
//     again.
//   - A webhook handler of your own, which parses the request with
//     [tgbotapi.BotAPI.HandleUpdate] and answers with [StatusCode]: a failed
//     update is answered 500, and Telegram repeats the request, which is
//     processed.
//
// HandleUpdate does not check the secret token: check the
// X-Telegram-Bot-Api-Secret-Token header before calling the HandlerFunc, or
// serve the webhook with package dedupehttp and [platform.Telegram] given its
// secret, which authenticates each request before it is remembered, and
// answers as [StatusCode] does:
//
//	tg := platform.Telegram.WithSecret(os.Getenv("TELEGRAM_WEBHOOK_SECRET"))
//	http.Handle("POST /telegram", dedupehttp.New(d, tg, handler))
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
