// Package dedupeline sends a bot's replies on LINE once, through the LINE
// Messaging API SDK for Go (github.com/line/line-bot-sdk-go/v8): [PushMessage]
// is a [reply.SendFunc] that sends a push message with the reply's retry key,
// so that a [reply.Sender] of [reply.LINE] keeps a record of each reply in a
// [dedupe.Store] and sends one whose outcome is unknown again with the same
// key, which LINE answers 409 instead of delivering it twice.
//
//	bot, _ := messaging_api.NewMessagingApiAPI(token)
//	sender := reply.New(store, reply.LINE)
//	compose := func(ctx context.Context) ([]byte, error) {
//		return json.Marshal(&messaging_api.PushMessageRequest{
//			To:       userID,
//			Messages: []messaging_api.MessageInterface{messaging_api.TextMessage{Text: answer}},
//		})
//	}
//	rc, err := sender.Send(ctx, dedupe.Key{Channel: "line", MessageID: ev.WebhookEventId}, 0,
//		compose, dedupeline.PushMessage(bot))
//
// The webhook side (a delivery's key, its signature) is package platform's
// [platform.LINE] preset with package dedupehttp; package reply's
// [reply.LINEPush] does what PushMessage does without the SDK.
//
// This package is a module of its own,
// github.com/gatewaykit/dedupe/contrib/dedupeline, so that only its users
// download the LINE SDK.
package dedupeline
