package reply

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/gatewaykit/dedupe"
)

// API is where a plain-HTTP send helper ([LINEPush], [LINEReply],
// [DiscordCreateMessage], [FeishuCreateMessage], [TelegramMethod],
// [SlackPostMessage], [SlackCheck]) calls its platform, and with which
// credential. Its zero value calls the platform's public address with no
// credential. An API is plain data, safe for concurrent use.
type API struct {
	// Client makes the requests; nil means http.DefaultClient. Give it a
	// Timeout, or give Send a context with a deadline: a send that runs out
	// of time has an unknown outcome, which the [Sender]'s policy decides.
	Client *http.Client
	// BaseURL replaces the platform's address ("https://api.line.me",
	// "https://discord.com", "https://open.feishu.cn",
	// "https://api.telegram.org", "https://slack.com"): Lark's
	// "https://open.larksuite.com", a proxy, or a test server. No trailing
	// slash.
	BaseURL string
	// Credential is the bot's secret: LINE's channel access token, Discord's
	// bot token, Feishu's tenant_access_token, Telegram's bot token, Slack's
	// bot token (xoxb-…). It is sent as each platform asks (a bearer token,
	// "Bot …", or Telegram's URL path).
	Credential string
}

// StatusError is the error of a send the platform answered with a status (or
// a body) that is not a success. A helper marks it with [NotSent] when the
// answer says the message was not accepted (a 4xx); a 5xx leaves the outcome
// unknown.
type StatusError struct {
	Platform string // "line", "discord", "feishu", "telegram", "slack"
	Status   int    // the HTTP status code
	Body     string // the start of the answer's body, for the log
}

// Error returns the platform, the status and the start of the body.
func (e *StatusError) Error() string {
	return fmt.Sprintf("reply: %s answered %d: %s", e.Platform, e.Status, e.Body)
}

// maxAnswer bounds how much of an answer a helper reads.
const maxAnswer = 1 << 20

// answer is a platform's answer to one request.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// call makes one request to a platform and reads its answer. An error of the
// request is returned as the outcome it leaves: [NotSent] when no connection
// was made (nothing reached the platform), unknown otherwise.
func (a API) call(ctx context.Context, platform, method, base, path string, header http.Header, body []byte) (answer, error) {
	if a.BaseURL != "" {
		base = a.BaseURL
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return answer{}, NotSent(fmt.Errorf("reply: %s: %w", platform, err))
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	c := a.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		// The URL is left out of the message: Telegram's holds the bot's
		// token.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		err = fmt.Errorf("reply: %s: %s: %w", platform, method, err)
		if dialFailed(err) {
			return answer{}, NotSent(err)
		}
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil && resp.StatusCode/100 == 2 {
		// Accepted, but the answer was cut: the id is lost, the outcome
		// unknown.
		return answer{}, fmt.Errorf("reply: %s: reading the answer: %w", platform, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// dialFailed reports whether err is a failure to connect: the request was
// never written, so the platform cannot have accepted it.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// statusError classifies an answer that is not a 2xx: a 4xx is [NotSent], a
// 5xx (or anything else) leaves the outcome unknown.
func statusError(platform string, a answer) error {
	e := &StatusError{Platform: platform, Status: a.status, Body: snippet(a.body)}
	if a.status >= 400 && a.status < 500 {
		return NotSent(e)
	}
	return e
}

// snippet returns the start of an answer's body for an error message.
func snippet(b []byte) string {
	const n = 200
	s := strings.ToValidUTF8(string(b), "?")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// withMembers returns the JSON object body with members set (replacing any
// of the same name). A body that is not a JSON object is an error: the
// caller's compose made it, so it is refused before anything is sent.
func withMembers(platform string, body []byte, members map[string]any) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, NotSent(fmt.Errorf("reply: %s: the body is not a JSON object: %v", platform, err))
	}
	for k, v := range members {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, NotSent(fmt.Errorf("reply: %s: %w", platform, err))
		}
		obj[k] = b
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, NotSent(fmt.Errorf("reply: %s: %w", platform, err))
	}
	return out, nil
}

// tokenOr returns m's token, or gen(m.Key, m.Slot) when the [Sender]'s
// platform has none (a custom [Platform]): the helper's token is
// deterministic either way.
func tokenOr(m Message, gen func(dedupe.Key, int) string) string {
	if m.Token != "" {
		return m.Token
	}
	return gen(m.Key, m.Slot)
}

// bearer is an Authorization header with a bearer token.
func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}
