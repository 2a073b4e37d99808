package replytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// call is one send call, parsed: the message it asks for and how its
// platform answers.
type call struct {
	m      Message
	scope  string        // what the token is scoped to
	window time.Duration // how long the token is honoured
	prefix string        // of the message ids
	// answer writes the platform's answer for the message f (repeat: an
	// earlier call's, returned again).
	answer func(w http.ResponseWriter, f first, repeat bool)
	// fail writes the platform's error answer.
	fail func(w http.ResponseWriter, status int, msg string)
	// rejected is the platform's message of a [Reject] (default "bad
	// request (injected)").
	rejected string
}

// run serves c: the fault drawn decides whether the message is accepted and
// whether the client gets the answer.
func (s *Server) run(w http.ResponseWriter, r *http.Request, c call) {
	f, released := s.fault()
	switch f {
	case FailBefore:
		s.notify(f)
		c.fail(w, http.StatusServiceUnavailable, "service unavailable")
		return
	case Reject:
		s.notify(f)
		msg := c.rejected
		if msg == "" {
			msg = "bad request (injected)"
		}
		c.fail(w, http.StatusBadRequest, msg)
		return
	case Throttle:
		s.notify(f)
		w.Header().Set("Retry-After", "5")
		c.fail(w, http.StatusTooManyRequests, "Too Many Requests: retry after 5")
		return
	}
	first, repeat := s.accept(c.m, c.scope, c.window, c.prefix)
	s.notify(f)
	switch f {
	case Hang:
		hang(r, released)
	case FailAfter:
		c.fail(w, http.StatusInternalServerError, "internal server error")
		return
	case BadGateway:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>\n")
		return
	}
	c.answer(w, first, repeat)
}

// notify tells Config.Notify of a call's fault.
func (s *Server) notify(f Fault) {
	if s.cfg.Notify != nil {
		s.cfg.Notify(f)
	}
}

// readJSON decodes r's body into v.
func readJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// uuidRE is the form of a UUID, in hexadecimal with hyphens.
var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// line serves LINE's push message: one message per text of the request.
// The fake takes one text message per request.
func (s *Server) line(w http.ResponseWriter, r *http.Request) {
	fail := func(w http.ResponseWriter, status int, msg string) {
		w.Header().Set("X-Line-Request-Id", "req-failed")
		writeJSON(w, status, map[string]string{"message": msg})
	}
	var in struct {
		To       string `json:"to"`
		Messages []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"messages"`
	}
	key := r.Header.Get("X-Line-Retry-Key")
	if err := readJSON(r, &in); err != nil || in.To == "" || len(in.Messages) != 1 || in.Messages[0].Type != "text" {
		fail(w, http.StatusBadRequest, "The request body has 1 error(s)")
		return
	}
	if key != "" && !uuidRE.MatchString(key) {
		fail(w, http.StatusBadRequest, "The value for the 'X-Line-Retry-Key' header is invalid")
		return
	}
	s.run(w, r, call{
		m:     Message{Platform: LINE, Chat: in.To, Text: in.Messages[0].Text, Token: key},
		scope: r.Header.Get("Authorization"), window: s.cfg.LINEWindow, prefix: "line-",
		fail: fail,
		answer: func(w http.ResponseWriter, f first, repeat bool) {
			if repeat {
				w.Header().Set("X-Line-Request-Id", "req-repeat")
				w.Header().Set("X-Line-Accepted-Request-Id", f.request)
				writeJSON(w, http.StatusConflict, map[string]string{"message": "The retry key is already accepted"})
				return
			}
			w.Header().Set("X-Line-Request-Id", f.request)
			writeJSON(w, http.StatusOK, map[string]any{"sentMessages": []map[string]string{{"id": f.id, "quoteToken": "q" + f.id}}})
		},
	})
}

// discord serves Discord's Create Message.
func (s *Server) discord(w http.ResponseWriter, r *http.Request) {
	fail := func(w http.ResponseWriter, status int, msg string) {
		writeJSON(w, status, map[string]any{"code": 0, "message": msg})
	}
	var in struct {
		Content      string `json:"content"`
		Nonce        string `json:"nonce"`
		EnforceNonce bool   `json:"enforce_nonce"`
	}
	if err := readJSON(r, &in); err != nil || in.Content == "" || len(in.Nonce) > 25 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 50035, "message": "Invalid Form Body"})
		return
	}
	channel := r.PathValue("channel")
	token := ""
	if in.EnforceNonce {
		token = in.Nonce
	}
	s.run(w, r, call{
		m:     Message{Platform: Discord, Chat: channel, Text: in.Content, Token: token},
		scope: r.Header.Get("Authorization"), window: s.cfg.DiscordWindow, prefix: "",
		fail: fail,
		answer: func(w http.ResponseWriter, f first, _ bool) {
			writeJSON(w, http.StatusOK, map[string]any{"id": f.id, "channel_id": channel, "content": in.Content, "nonce": in.Nonce})
		},
	})
}

// feishu serves Feishu's send message, with receive_id_type=chat_id.
func (s *Server) feishu(w http.ResponseWriter, r *http.Request) {
	fail := func(w http.ResponseWriter, status int, msg string) {
		writeJSON(w, status, map[string]any{"code": 99991400, "msg": msg})
	}
	var in struct {
		ReceiveID string `json:"receive_id"`
		MsgType   string `json:"msg_type"`
		Content   string `json:"content"`
		UUID      string `json:"uuid"`
	}
	var content struct {
		Text string `json:"text"`
	}
	if err := readJSON(r, &in); err != nil || in.ReceiveID == "" || in.MsgType != "text" ||
		json.Unmarshal([]byte(in.Content), &content) != nil || len(in.UUID) > 50 ||
		r.URL.Query().Get("receive_id_type") == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 99992402, "msg": "field validation failed"})
		return
	}
	s.run(w, r, call{
		m:     Message{Platform: Feishu, Chat: in.ReceiveID, Text: content.Text, Token: in.UUID},
		scope: r.Header.Get("Authorization"), window: s.cfg.FeishuWindow, prefix: "om_",
		fail: fail,
		answer: func(w http.ResponseWriter, f first, _ bool) {
			writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{
				"message_id": f.id, "chat_id": in.ReceiveID, "msg_type": "text", "body": map[string]string{"content": in.Content}}})
		},
	})
}

// telegram serves the Bot API's sendMessage, with a JSON, form-encoded or
// multipart body.
func (s *Server) telegram(w http.ResponseWriter, r *http.Request) {
	fail := func(w http.ResponseWriter, status int, msg string) {
		out := map[string]any{"ok": false, "error_code": status, "description": msg}
		if status == http.StatusTooManyRequests {
			out["parameters"] = map[string]int{"retry_after": 5}
		}
		writeJSON(w, status, out)
	}
	if !strings.HasPrefix(r.PathValue("bot"), "bot") {
		fail(w, http.StatusNotFound, "Not Found")
		return
	}
	chat, text, err := telegramParams(r)
	if err != nil || chat == "" || text == "" {
		fail(w, http.StatusBadRequest, "Bad Request: message text is empty")
		return
	}
	var chatID any = chat // a number when it is one, as the Bot API answers
	if n, err := strconv.ParseInt(chat, 10, 64); err == nil {
		chatID = n
	}
	s.run(w, r, call{
		m:      Message{Platform: Telegram, Chat: chat, Text: text},
		prefix: "", fail: fail, rejected: "Bad Request: chat not found",
		answer: func(w http.ResponseWriter, f first, _ bool) {
			writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": map[string]any{
				"message_id": json.Number(f.id), "date": f.at.Unix(),
				"chat": map[string]any{"id": chatID, "type": "private"}, "text": text}})
		},
	})
}

// telegramParams reads a sendMessage's chat_id and text from its body: JSON,
// or a form (form-encoded or multipart).
func telegramParams(r *http.Request) (chat, text string, err error) {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var in struct {
			ChatID json.RawMessage `json:"chat_id"`
			Text   string          `json:"text"`
		}
		err := readJSON(r, &in)
		return strings.Trim(string(in.ChatID), `"`), in.Text, err
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		err = r.ParseMultipartForm(1 << 20)
	} else {
		err = r.ParseForm()
	}
	return r.FormValue("chat_id"), r.FormValue("text"), err
}

// telegramGetMe serves the Bot API's getMe: the bot of the token.
func (s *Server) telegramGetMe(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.PathValue("bot"), "bot") {
		writeJSON(w, http.StatusNotFound, map[string]any{"ok": false, "error_code": 404, "description": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": map[string]any{
		"id": 1, "is_bot": true, "first_name": "replytest", "username": "replytest_bot"}})
}

// String describes m in one line.
func (m Message) String() string {
	return fmt.Sprintf("%s %s %q token=%q id=%s", m.Platform, m.Chat, m.Text, m.Token, m.ID)
}
