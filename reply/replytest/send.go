package replytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/gatewaykit/dedupe/reply"
)

// Client makes the platforms' send calls over plain HTTP, in the requests'
// real shapes, to a [Server] (or any server at BaseURL), and classifies
// each answer for [reply.Sender]: a 2xx (and LINE's 409, "accepted before")
// is sent; any other 4xx is [reply.NotSent]; a 5xx, a timeout or a dropped
// connection leaves the outcome unknown.
type Client struct {
	// HTTP is the client of the calls (default http.DefaultClient); its
	// Timeout bounds a call the server never answers.
	HTTP *http.Client
	// BaseURL is the server's, such as [Server.URL] returns.
	BaseURL string
	// Auth is the bot's credential: the Authorization header's value, and
	// for Telegram the token in the path.
	Auth string
}

// Send returns the [reply.SendFunc] that sends a reply's body as a text
// message to chat on platform ([LINE], [Discord], [Feishu] or [Telegram]),
// with the reply's token where the platform takes one.
func (c Client) Send(platform, chat string) (reply.SendFunc, error) {
	switch platform {
	case LINE, Discord, Feishu, Telegram:
	default:
		return nil, fmt.Errorf("replytest: no platform %q", platform)
	}
	return func(ctx context.Context, m reply.Message) (string, error) {
		req, err := c.request(ctx, platform, chat, m)
		if err != nil {
			return "", reply.NotSent(err)
		}
		hc := c.HTTP
		if hc == nil {
			hc = http.DefaultClient
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", fmt.Errorf("replytest: %s: %w", platform, err) // unknown
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return "", fmt.Errorf("replytest: %s: reading the answer: %w", platform, err) // unknown
		}
		return classify(platform, resp, b)
	}, nil
}

// request builds the send call of m on platform.
func (c Client) request(ctx context.Context, platform, chat string, m reply.Message) (*http.Request, error) {
	var url string
	var body any
	switch platform {
	case LINE:
		url = c.BaseURL + "/v2/bot/message/push"
		body = map[string]any{"to": chat, "messages": []map[string]string{{"type": "text", "text": string(m.Body)}}}
	case Discord:
		url = c.BaseURL + "/api/v10/channels/" + chat + "/messages"
		body = map[string]any{"content": string(m.Body), "nonce": m.Token, "enforce_nonce": m.Token != ""}
	case Feishu:
		url = c.BaseURL + "/open-apis/im/v1/messages?receive_id_type=chat_id"
		content, _ := json.Marshal(map[string]string{"text": string(m.Body)})
		body = map[string]string{"receive_id": chat, "msg_type": "text", "content": string(content), "uuid": m.Token}
	case Telegram:
		url = c.BaseURL + "/bot" + c.Auth + "/sendMessage"
		body = map[string]string{"chat_id": chat, "text": string(m.Body)}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("replytest: %s: %w", platform, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("replytest: %s: %w", platform, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if platform != Telegram {
		req.Header.Set("Authorization", "Bearer "+c.Auth)
	}
	if platform == LINE && m.Token != "" {
		req.Header.Set("X-Line-Retry-Key", m.Token)
	}
	return req, nil
}

// classify reads a platform's answer: the sent message's id, or an error
// marked [reply.NotSent] for a refusal, or a plain one for an unknown outcome.
func classify(platform string, resp *http.Response, b []byte) (string, error) {
	switch {
	case platform == LINE && resp.StatusCode == http.StatusConflict:
		// "Once the request is accepted, subsequent retried requests are
		// blocked and you'll get the status code 409": sent before.
		return resp.Header.Get("X-Line-Accepted-Request-Id"), nil
	case resp.StatusCode >= 500:
		return "", fmt.Errorf("replytest: %s: status %d: %s", platform, resp.StatusCode, b)
	case resp.StatusCode >= 400:
		return "", reply.NotSent(fmt.Errorf("replytest: %s: status %d: %s", platform, resp.StatusCode, b))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return "", fmt.Errorf("replytest: %s: status %d", platform, resp.StatusCode)
	}
	id, err := sentID(platform, b)
	if err != nil {
		return "", fmt.Errorf("replytest: %s: status %d: %w", platform, resp.StatusCode, err)
	}
	return id, nil
}

// sentID reads the message id from a 2xx answer's body.
func sentID(platform string, b []byte) (string, error) {
	var out struct {
		SentMessages []struct { // LINE
			ID string `json:"id"`
		} `json:"sentMessages"`
		ID   string `json:"id"`   // Discord
		Code *int   `json:"code"` // Feishu
		Data struct {
			MessageID string `json:"message_id"`
		} `json:"data"`
		Result struct { // Telegram
			MessageID json.Number `json:"message_id"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return "", err
	}
	var id string
	switch platform {
	case LINE:
		if len(out.SentMessages) > 0 {
			id = out.SentMessages[0].ID
		}
	case Discord:
		id = out.ID
	case Feishu:
		if out.Code == nil || *out.Code != 0 {
			return "", reply.NotSent(errors.New("code " + strconv.Itoa(deref(out.Code))))
		}
		id = out.Data.MessageID
	case Telegram:
		id = out.Result.MessageID.String()
	}
	if id == "" {
		return "", errors.New("no message id in the answer")
	}
	return id, nil
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
