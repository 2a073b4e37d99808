package dedupetgbotapi_test

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupetgbotapi"
	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

func ExampleHandler() {
	d := dedupe.New(nil) // a memory store; Redis or PostgreSQL for several replicas
	handle := dedupetgbotapi.Handler(d, "telegram", func(ctx context.Context, u tgbotapi.Update) error {
		fmt.Println("handled update", u.UpdateID, u.Message.Text)
		return nil
	})

	// A bot reads its updates from api.GetUpdatesChan(tgbotapi.NewUpdate(0));
	// here, one update and a copy that a restarted replica fetched again.
	updates := make(chan tgbotapi.Update, 2)
	u := tgbotapi.Update{UpdateID: 1001, Message: &tgbotapi.Message{Text: "hi"}}
	updates <- u
	updates <- u
	close(updates)
	for u := range updates {
		if err := handle(context.Background(), u); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println(d.Stats().Duplicates, "duplicate")
	// Output:
	// handled update 1001 hi
	// 1 duplicate
}

// Behind a webhook, a failed update is answered 500, so that Telegram
// delivers it again and the retry is processed; a copy whose first is still
// running after the wait is answered 503, and repeated later too.
func ExampleHandler_webhook() {
	var api *tgbotapi.BotAPI // from tgbotapi.NewBotAPI(token)
	d := dedupe.New(nil)
	handle := dedupetgbotapi.Handler(d, "telegram", func(ctx context.Context, u tgbotapi.Update) error {
		return nil // process the update
	})
	secretToken := "…" // given to setWebhook
	http.HandleFunc("POST /telegram", func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("X-Telegram-Bot-Api-Secret-Token")
		if subtle.ConstantTimeCompare([]byte(got), []byte(secretToken)) != 1 {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		u, err := api.HandleUpdate(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(dedupetgbotapi.StatusCode(handle(r.Context(), *u)))
	})
}
