package dedupetelebot_test

import (
	"fmt"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupetelebot"
	tele "gopkg.in/telebot.v3"
)

func ExampleMiddleware() {
	d := dedupe.New(nil) // a memory store; Redis or PostgreSQL for several replicas
	// A real bot has a Token and a Poller (or a Webhook); Offline keeps this
	// example off the network.
	b, err := tele.NewBot(tele.Settings{Offline: true, Synchronous: true})
	if err != nil {
		panic(err)
	}
	b.Use(dedupetelebot.Middleware(d, "telegram"))
	b.Handle(tele.OnText, func(c tele.Context) error {
		fmt.Println("handled update", c.Update().ID, c.Text())
		return nil
	})

	u := tele.Update{ID: 1001, Message: &tele.Message{Text: "hi"}}
	b.ProcessUpdate(u)
	b.ProcessUpdate(u) // Telegram's retry of the webhook: dropped
	fmt.Println(d.Stats().Duplicates, "duplicate")
	// Output:
	// handled update 1001 hi
	// 1 duplicate
}

// Two bots share one store: each has a channel of its own, since Telegram
// numbers the updates of each bot on its own.
func ExampleMiddleware_twoBots() {
	d := dedupe.New(nil)
	for _, name := range []string{"telegram-support", "telegram-sales"} {
		b, err := tele.NewBot(tele.Settings{Offline: true, Synchronous: true})
		if err != nil {
			panic(err)
		}
		b.Use(dedupetelebot.Middleware(d, name))
		b.Handle(tele.OnText, func(c tele.Context) error {
			fmt.Println(name, "handled update", c.Update().ID)
			return nil
		})
		b.ProcessUpdate(tele.Update{ID: 7, Message: &tele.Message{Text: "hi"}})
	}
	// Output:
	// telegram-support handled update 7
	// telegram-sales handled update 7
}
