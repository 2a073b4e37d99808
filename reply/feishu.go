package reply

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// feishuBase is the address of Feishu's open platform (Lark's is
// https://open.larksuite.com: set [API].BaseURL).
const feishuBase = "https://open.feishu.cn"

// FeishuCreateMessage returns a [SendFunc] that sends the body (the send
// message API's JSON body, {"receive_id": …, "msg_type": …, "content": …})
// with POST /open-apis/im/v1/messages?receive_id_type=receiveIDType
// ("open_id", "union_id", "user_id", "email" or "chat_id"), with the reply's
// token as its uuid member (the [Sender]'s token, a [UUID] with the [Feishu]
// preset; a UUID of the key and slot when the platform has none).
//
// Feishu documents uuid in "Send message"
// (https://open.feishu.cn/document/server-docs/im-v1/message/create): a
// unique string of at most 50 characters set by the caller to deduplicate
// sends: requests with the same uuid send at most one message within one
// hour. Lark's API is the same at https://open.larksuite.com. The outcome is:
//
//   - 200 with code 0: sent; the id is data.message_id.
//   - a 4xx, or a 200 whose code is not 0 (Feishu answers most errors 400
//     with a code: 230001 bad parameter, 230002 bot not in the chat, 230020
//     rate limit, …): [NotSent].
//   - a 5xx, a timeout, a cut connection: unknown.
func FeishuCreateMessage(api API, receiveIDType string) SendFunc {
	path := "/open-apis/im/v1/messages?receive_id_type=" + url.QueryEscape(receiveIDType)
	return func(ctx context.Context, m Message) (string, error) {
		body, err := withMembers("feishu", m.Body, map[string]any{"uuid": tokenOr(m, UUID)})
		if err != nil {
			return "", err
		}
		a, err := api.call(ctx, "feishu", http.MethodPost, feishuBase, path, bearer(api.Credential), body)
		if err != nil {
			return "", err
		}
		if a.status/100 != 2 {
			return "", statusError("feishu", a)
		}
		var r struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
			Data struct {
				MessageID string `json:"message_id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(a.body, &r); err != nil {
			// A 200 we cannot read: accepted or not, we cannot tell.
			return "", fmt.Errorf("reply: feishu: reading the answer: %w", err)
		}
		if r.Code != 0 {
			return "", NotSent(fmt.Errorf("reply: feishu answered code %d: %s", r.Code, r.Msg))
		}
		return r.Data.MessageID, nil
	}
}
