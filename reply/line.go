package reply

import (
	"context"
	"encoding/json"
	"net/http"
)

// lineBase is the address of LINE's Messaging API.
const lineBase = "https://api.line.me"

// LINEPush returns a [SendFunc] that sends the body (a push request's JSON,
// {"to": …, "messages": […]}) with LINE's push message API, POST
// /v2/bot/message/push, with the reply's token in the X-Line-Retry-Key header
// (the [Sender]'s token, a [UUID] with the [LINE] preset; a UUID of the key
// and slot when the platform has none).
//
// LINE documents the retry key in "Retry failed API requests"
// (https://developers.line.biz/en/docs/messaging-api/retrying-api-request):
// a 5xx or a timeout may still have delivered the message; with a retry key
// "the request is executed only once, no matter how many times you make the
// request. Once the request is accepted, subsequent retried requests are
// blocked and you'll get the status code 409." So the outcome is:
//
//   - 200: sent; the id is the first of sentMessages.
//   - 409: accepted before, by an earlier attempt with the same key: sent;
//     the id is the first of sentMessages if the answer has it, else the
//     X-Line-Accepted-Request-Id header.
//   - another 4xx (400 bad request, 401, 403, 429 rate limit): [NotSent].
//   - a 5xx, a timeout, a cut connection: unknown (the [Sender] sends again
//     with the same key).
func LINEPush(api API) SendFunc {
	return func(ctx context.Context, m Message) (string, error) {
		h := bearer(api.Credential)
		h.Set("X-Line-Retry-Key", tokenOr(m, UUID))
		a, err := api.call(ctx, "line", http.MethodPost, lineBase, "/v2/bot/message/push", h, m.Body)
		if err != nil {
			return "", err
		}
		switch {
		case a.status/100 == 2:
			return lineSentID(a), nil
		case a.status == http.StatusConflict:
			return lineSentID(a), nil
		}
		return "", statusError("line", a)
	}
}

// LINEReply returns a [SendFunc] that sends the body (a reply request's
// JSON, {"replyToken": …, "messages": […]}) with LINE's reply message API,
// POST /v2/bot/message/reply. That API takes no retry key (LINE answers 400
// to one: "Retry failed API requests" lists the APIs that take it): its
// reply token is its own, used once. A second attempt with the same reply
// token cannot post a second message, but LINE answers it 400 ("Invalid
// reply token") whether the first attempt was accepted or the token expired,
// so a 4xx of an attempt after the first leaves the outcome unknown; a 4xx of
// the first attempt is [NotSent]. Use it with the [LINE] preset (its
// [Native] policy sends again, which cannot duplicate) within the reply
// token's validity, and [LINEPush] past it.
func LINEReply(api API) SendFunc {
	return func(ctx context.Context, m Message) (string, error) {
		a, err := api.call(ctx, "line", http.MethodPost, lineBase, "/v2/bot/message/reply", bearer(api.Credential), m.Body)
		if err != nil {
			return "", err
		}
		if a.status/100 == 2 {
			return lineSentID(a), nil
		}
		err = statusError("line", a)
		if m.Attempt > 1 && IsNotSent(err) {
			return "", &StatusError{Platform: "line", Status: a.status, Body: snippet(a.body)}
		}
		return "", err
	}
}

// lineSentID returns the id of the first message LINE's answer lists, or the
// id of the accepted request.
func lineSentID(a answer) string {
	var r struct {
		SentMessages []struct {
			ID string `json:"id"`
		} `json:"sentMessages"`
	}
	if json.Unmarshal(a.body, &r) == nil && len(r.SentMessages) > 0 {
		return r.SentMessages[0].ID
	}
	return a.header.Get("X-Line-Accepted-Request-Id")
}
