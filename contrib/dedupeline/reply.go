package dedupeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/gatewaykit/dedupe/reply"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"
)

// PushMessage returns a [reply.SendFunc] that sends a reply with api's push
// message call, PushMessageWithHttpInfo, with the reply's token as its
// X-Line-Retry-Key (the [reply.Sender]'s token, a [reply.UUID] with the
// [reply.LINE] preset; a UUID of the key and slot when the platform has
// none). The body is the JSON of a *messaging_api.PushMessageRequest (its
// json.Marshal); PushMessage decodes it with the SDK's own UnmarshalJSON.
// api is not changed: each send runs on a copy of it bound to the send's
// context.
//
// LINE documents the retry key in "Retry failed API requests"
// (https://developers.line.biz/en/docs/messaging-api/retrying-api-request):
// a request with a retry key is executed only once, however often it is
// made; once it was accepted, a retry with the same key gets 409. So the
// outcome of a send is:
//
//   - 200: sent; the id is the first of sentMessages.
//   - 409: accepted before, by an earlier attempt with the same key: sent;
//     the id is the first of the answer's sentMessages, else its
//     X-Line-Accepted-Request-Id header.
//   - another 4xx (400, 401, 403, 429) or a failure to connect:
//     [reply.NotSent].
//   - a 5xx, a timeout, a cut connection: unknown.
func PushMessage(api *messaging_api.MessagingApiAPI) reply.SendFunc {
	return func(ctx context.Context, m reply.Message) (string, error) {
		var req messaging_api.PushMessageRequest
		if err := json.Unmarshal(m.Body, &req); err != nil {
			return "", reply.NotSent(fmt.Errorf("dedupeline: the reply's body is not a push message request: %w", err))
		}
		key := m.Token
		if key == "" {
			key = reply.UUID(m.Key, m.Slot)
		}
		call := *api
		res, out, err := call.WithContext(ctx).PushMessageWithHttpInfo(&req, key)
		return outcome(res, out, err)
	}
}

// outcome classifies the result of a push.
func outcome(res *http.Response, out *messaging_api.PushMessageResponse, err error) (string, error) {
	switch {
	case err == nil && out != nil && len(out.SentMessages) > 0:
		return out.SentMessages[0].Id, nil
	case res == nil:
		err = fmt.Errorf("dedupeline: push: %w", err)
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return "", reply.NotSent(err)
		}
		return "", err
	case res.StatusCode/100 == 2:
		return "", nil // accepted; an answer without sentMessages (or cut short) loses only the id
	case res.StatusCode == http.StatusConflict:
		return acceptedID(res), nil
	case res.StatusCode/100 == 4:
		return "", reply.NotSent(fmt.Errorf("dedupeline: push: %w", err))
	}
	return "", fmt.Errorf("dedupeline: push: %w", err)
}

// acceptedID is the id of the message an earlier attempt sent, from a 409's
// body (the SDK leaves it readable) or its header.
func acceptedID(res *http.Response) string {
	var r struct {
		SentMessages []struct {
			ID string `json:"id"`
		} `json:"sentMessages"`
	}
	if res.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		if json.Unmarshal(b, &r) == nil && len(r.SentMessages) > 0 {
			return r.SentMessages[0].ID
		}
	}
	return res.Header.Get("X-Line-Accepted-Request-Id")
}
