package dedupetgbotapi_test

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"time"

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

// A getUpdates batch whose second update fails: the offset to ask next is
// that update's, so Telegram sends it again (with the update after it, then
// a duplicate), and the next batch confirms all three.
func ExampleBatch() {
	d := dedupe.New(nil)
	failed := false
	run := dedupetgbotapi.Batch(d, "telegram", func(ctx context.Context, u tgbotapi.Update) error {
		if u.UpdateID == 102 && !failed {
			failed = true
			return fmt.Errorf("update %d: the model timed out", u.UpdateID)
		}
		fmt.Println("handled update", u.UpdateID)
		return nil
	})
	batch := []tgbotapi.Update{{UpdateID: 101}, {UpdateID: 102}, {UpdateID: 103}}
	offset, errs := run(context.Background(), batch)
	fmt.Println("next offset", offset, errs[1])

	// The next getUpdates call, with that offset, returns 102 and 103 again.
	offset, errs = run(context.Background(), batch[1:])
	fmt.Println("next offset", offset, errs[1])
	// Output:
	// handled update 101
	// handled update 103
	// next offset 102 update 102: the model timed out
	// handled update 102
	// next offset 104 dedupe: duplicate message
}

// The polling loop: Poll asks getUpdates for batches of up to 100 updates
// and confirms an update only once it was processed, unlike GetUpdatesChan.
func ExamplePoll() {
	var api *tgbotapi.BotAPI // from tgbotapi.NewBotAPI(token)
	d := dedupe.New(nil)     // Redis or PostgreSQL for several replicas
	run := dedupetgbotapi.Batch(d, "telegram", func(ctx context.Context, u tgbotapi.Update) error {
		return nil // process the update
	})
	cfg := tgbotapi.NewUpdate(0)
	cfg.Timeout = 30 // long polling, in seconds
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if api != nil {
		_ = dedupetgbotapi.Poll(ctx, api, cfg, run, time.Second)
	}
}
