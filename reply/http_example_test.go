package reply_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/reply"
)

// platformAt starts a stand-in for a platform's API that answers every send
// with answer, and prints what identifies the send's token.
func platformAt(answer string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var b map[string]any
		_ = json.Unmarshal(body, &b)
		switch {
		case r.Header.Get("X-Line-Retry-Key") != "":
			fmt.Println("X-Line-Retry-Key:", r.Header.Get("X-Line-Retry-Key"))
		case b["nonce"] != nil:
			fmt.Println("nonce:", b["nonce"], "enforce_nonce:", b["enforce_nonce"])
		case b["uuid"] != nil:
			fmt.Println("uuid:", b["uuid"])
		case b["metadata"] != nil:
			fmt.Println("metadata:", b["metadata"])
		}
		_, _ = io.WriteString(w, answer)
	}))
}

// A LINE push through a Sender: the retry key is the reply's UUID; a send
// whose outcome is unknown (a timeout, a 5xx) is sent again by the next Send
// with the same key, and LINE answers 409 instead of posting it twice.
func ExampleLINEPush() {
	srv := platformAt(`{"sentMessages":[{"id":"461230966842064897","quoteToken":"q"}]}`)
	defer srv.Close()
	api := reply.API{Client: &http.Client{Timeout: 10 * time.Second}, BaseURL: srv.URL, Credential: "channel-access-token"}

	sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.LINE)
	key := dedupe.Key{Channel: "line", MessageID: "01H8Z3"} // the webhook event's id
	compose := func(context.Context) ([]byte, error) {
		return []byte(`{"to":"U4af4980629","messages":[{"type":"text","text":"Hello"}]}`), nil
	}
	rc, err := sender.Send(context.Background(), key, 0, compose, reply.LINEPush(api))
	fmt.Println(rc.ID, rc.Sent, err)
	// Output:
	// X-Line-Retry-Key: 617ee7e1-62e0-80c2-9075-aba36ef1d19a
	// 461230966842064897 true <nil>
}

// A Discord message with a nonce: a second attempt within Discord's few
// minutes gets the first message back.
func ExampleDiscordCreateMessage() {
	srv := platformAt(`{"id":"1180000000000000001","content":"Hello"}`)
	defer srv.Close()
	api := reply.API{Client: &http.Client{Timeout: 10 * time.Second}, BaseURL: srv.URL, Credential: "bot-token"}

	sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Discord)
	key := dedupe.Key{Channel: "discord", MessageID: "1179999999999999999"}
	compose := func(context.Context) ([]byte, error) { return []byte(`{"content":"Hello"}`), nil }
	rc, err := sender.Send(context.Background(), key, 0, compose, reply.DiscordCreateMessage(api, "1100000000000000000"))
	fmt.Println(rc.ID, err)
	// Output:
	// nonce: 0awk9tutj2q7q27wnq9gpt1ln enforce_nonce: true
	// 1180000000000000001 <nil>
}

// A Feishu message with its uuid; for Lark set BaseURL to
// https://open.larksuite.com.
func ExampleFeishuCreateMessage() {
	srv := platformAt(`{"code":0,"msg":"success","data":{"message_id":"om_dc13264520392913993dd051dba21dcf"}}`)
	defer srv.Close()
	api := reply.API{Client: &http.Client{Timeout: 10 * time.Second}, BaseURL: srv.URL, Credential: "tenant-access-token"}

	sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Feishu)
	key := dedupe.Key{Channel: "feishu", MessageID: "om_5ce6d572455d361153b7cb51da133945"}
	compose := func(context.Context) ([]byte, error) {
		return []byte(`{"receive_id":"oc_84983ff6516d731e5b5f68d4ea2e1da5","msg_type":"text","content":"{\"text\":\"Hello\"}"}`), nil
	}
	rc, err := sender.Send(context.Background(), key, 0, compose, reply.FeishuCreateMessage(api, "chat_id"))
	fmt.Println(rc.ID, err)
	// Output:
	// uuid: 1a455dde-04db-8650-a934-dbe05b5fcce7
	// om_dc13264520392913993dd051dba21dcf <nil>
}

// Telegram has no token: at most once by default (a reply whose send's
// outcome is unknown is reported with ErrMaybeLost, not sent again), or at
// least once with WithPolicy (it is sent again, Receipt.MaybeDuplicate set).
func ExampleTelegramMethod() {
	srv := platformAt(`{"ok":true,"result":{"message_id":42,"chat":{"id":1}}}`)
	defer srv.Close()
	api := reply.API{Client: &http.Client{Timeout: 10 * time.Second}, BaseURL: srv.URL, Credential: "123:bot-token"}

	atLeastOnce := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Telegram, reply.WithPolicy(reply.AtLeastOnce))
	key := dedupe.Key{Channel: "telegram", MessageID: "8817"} // the update_id
	compose := func(context.Context) ([]byte, error) { return []byte(`{"chat_id":1,"text":"Hello"}`), nil }
	rc, err := atLeastOnce.Send(context.Background(), key, 0, compose, reply.TelegramMethod(api, "sendMessage"))
	fmt.Println(rc.ID, rc.MaybeDuplicate, err)
	// Output:
	// 42 false <nil>
}

// Slack has no token, but a reply carries its token in message metadata, and
// SlackCheck reads the channel's history before a reply whose send's outcome
// is unknown is sent again.
func ExampleSlackPostMessage() {
	srv := platformAt(`{"ok":true,"channel":"C123ABC456","ts":"1503435956.000247"}`)
	defer srv.Close()
	api := reply.API{Client: &http.Client{Timeout: 10 * time.Second}, BaseURL: srv.URL, Credential: "xoxb-bot-token"}

	sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Slack, reply.WithCheck(reply.SlackCheck(api, 0)))
	key := dedupe.Key{Channel: "slack", MessageID: "Ev08MFMKH6"} // the event_id
	compose := func(context.Context) ([]byte, error) { return []byte(`{"channel":"C123ABC456","text":"Hello"}`), nil }
	rc, err := sender.Send(context.Background(), key, 0, compose, reply.SlackPostMessage(api))
	fmt.Println(rc.ID, err)
	// Output:
	// metadata: map[event_payload:map[token:aef6a5b9-bda2-8dff-95f8-c8e1b7735276] event_type:dedupe_reply]
	// 1503435956.000247 <nil>
}
