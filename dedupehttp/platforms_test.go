package dedupehttp_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
	"github.com/gatewaykit/dedupe/queue"
)

// The single-message presets of issue 36, each served through the
// middleware (New) and NewAsync, in memory and with a SQLite queue: real
// deliveries, signed (and encrypted) by platformtest as the platform does,
// are processed once however often they come again, re-signed; forged ones
// are answered 401 and reach neither the store nor the queue.
//
// The plaintexts are the platforms' documented examples: WeChat's text
// message (Receiving standard messages,
// https://developers.weixin.qq.com/doc/offiaccount/Message_Management/Receiving_standard_messages.html),
// WeCom's (接收普通消息, https://developer.work.weixin.qq.com/document/path/90239),
// DingTalk's robot message (https://open.dingtalk.com/document/isvapp/receive-message)
// and user_add_org event (通讯录事件), and platform/testdata's Standard
// Webhooks, GitHub and Stripe events.

// platformNow is when the deliveries are signed and received.
var platformNow = time.Unix(1764448112, 0)

// platformCase is a preset and how its platform delivers message i at a
// time, signed with the preset's secret or, forged, with another.
type platformCase struct {
	preset platform.Preset
	// deliver returns the request of message i signed by s at time at.
	deliver func(s *platformtest.Signer, i int, at time.Time) *http.Request
	seed    string
	signer  string // the platformtest name
	// stale is true for a platform that signs a timestamp with a window.
	stale bool
	// bodySigned is false for DingTalk's robot, whose sign covers the
	// timestamp alone: a tampered body is not a forgery it can see.
	bodySigned bool
}

// signedPost posts body with the headers s signs it with.
func signedPost(s *platformtest.Signer, body []byte, at time.Time) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	for k, v := range s.Sign(body, at) {
		r.Header[k] = v
	}
	return r
}

// idPost posts body with the headers with which s signs it under id.
func idPost(s *platformtest.Signer, id string, body []byte, at time.Time) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	for k, v := range s.SignID(id, body, at) {
		r.Header[k] = v
	}
	return r
}

// queryPost posts msg encrypted and signed in the URL query, as WeChat,
// WeCom and DingTalk's event subscriptions do.
func queryPost(s *platformtest.Signer, msg []byte, at time.Time) *http.Request {
	q, body := s.SignQuery(msg, at)
	return httptest.NewRequest(http.MethodPost, "/hook?"+q.Encode(), bytes.NewReader(body))
}

// ruleHook is a source built from configuration: the id at a JSON Pointer,
// an HMAC-SHA256 in hex over "{timestamp}.{body}", the timestamp in a
// header.
var ruleHook = platform.Rule{
	Name: "rulehook", ID: "/data/id", Timestamp: "header:X-Hook-Time", Tolerance: 5 * time.Minute, TTL: time.Hour,
	Signature: platform.SignatureRule{Header: "X-Hook-Signature", Signed: "{timestamp}.{body}", Encoding: "hex"},
}

func platformCases(t *testing.T) map[string]platformCase {
	rule, err := platform.NewPreset(ruleHook)
	require.NoError(t, err)
	stripe := testdata(t, "stripe_event.json")
	webhooks := testdata(t, "webhooks_contact_created.json")
	github := testdata(t, "github_ping.json")
	wechatText := `<xml><ToUserName><![CDATA[toUser]]></ToUserName><FromUserName><![CDATA[fromUser]]></FromUserName><CreateTime>1348831860</CreateTime><MsgType><![CDATA[text]]></MsgType><Content><![CDATA[this is a test]]></Content><MsgId>%d</MsgId></xml>`
	wecomText := `<xml><ToUserName><![CDATA[toUser]]></ToUserName><FromUserName><![CDATA[fromUser]]></FromUserName><CreateTime>1348831860</CreateTime><MsgType><![CDATA[text]]></MsgType><Content><![CDATA[this is a test]]></Content><MsgId>%d</MsgId><AgentID>1</AgentID></xml>`
	robot := `{"conversationId":"xxx","chatbotCorpId":"dinge8a565xxxx","msgId":"msg%d","senderNick":"杨xx","createAt":1613630252678,"conversationType":"2","text":{"content":" 你好"},"msgtype":"text"}`
	userAdd := `{"EventType":"user_add_org","TimeStamp":"1445827045067","UserId":["u%d"],"CorpId":"ding1"}`
	return map[string]platformCase{
		"wechat": {preset: platform.WeChat, signer: "wechat", stale: true, bodySigned: true,
			deliver: func(s *platformtest.Signer, i int, at time.Time) *http.Request {
				return queryPost(s, fmt.Appendf(nil, wechatText, 1234567890123456+i), at)
			}},
		"wecom": {preset: platform.WeCom, signer: "wecom", stale: true, bodySigned: true,
			deliver: func(s *platformtest.Signer, i int, at time.Time) *http.Request {
				return queryPost(s, fmt.Appendf(nil, wecomText, 4363689963896700987+i), at)
			}},
		"dingtalk": {preset: platform.DingTalk, signer: "dingtalk", stale: true,
			deliver: func(s *platformtest.Signer, i int, at time.Time) *http.Request {
				return signedPost(s, fmt.Appendf(nil, robot, i), at)
			}},
		"dingtalk-events": {preset: platform.DingTalkEvents, signer: "dingtalk-events", stale: true, bodySigned: true,
			deliver: func(s *platformtest.Signer, i int, at time.Time) *http.Request {
				return queryPost(s, fmt.Appendf(nil, userAdd, i), at)
			}},
		"webhooks-v1": {preset: platform.StandardWebhooks, signer: "webhooks", stale: true, bodySigned: true,
			deliver: func(s *platformtest.Signer, i int, at time.Time) *http.Request {
				return idPost(s, fmt.Sprint("msg_", i), webhooks, at)
			}},
		"webhooks-v1a": {preset: platform.StandardWebhooks, signer: "webhooks-v1a", stale: true, bodySigned: true,
			deliver: func(s *platformtest.Signer, i int, at time.Time) *http.Request {
				return idPost(s, fmt.Sprint("msg_", i), webhooks, at)
			}},
		"github": {preset: platform.GitHub, signer: "github", bodySigned: true,
			deliver: func(s *platformtest.Signer, i int, at time.Time) *http.Request {
				return idPost(s, fmt.Sprintf("72d3162e-cc78-11e3-81ab-4c9367dc%04d", i), github, at)
			}},
		"stripe": {preset: platform.Stripe, signer: "stripe", stale: true, bodySigned: true,
			deliver: func(s *platformtest.Signer, i int, at time.Time) *http.Request {
				return signedPost(s, bytes.Replace(stripe, []byte("evt_1NG8Du2eZvKYlo2CUI79vXWy"), fmt.Appendf(nil, "evt_%d", i), 1), at)
			}},
		"rule": {preset: rule, signer: "rule", stale: true, bodySigned: true,
			deliver: func(s *platformtest.Signer, i int, at time.Time) *http.Request {
				return rulePost(s.Secret(), fmt.Appendf(nil, `{"type":"order.paid","data":{"id":"ord_%d"}}`, i), at)
			}},
	}
}

// rulePost posts body signed as ruleHook says, with secret.
func rulePost(secret string, body []byte, at time.Time) *http.Request {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	r.Header.Set("X-Hook-Time", ts)
	r.Header.Set("X-Hook-Signature", hex.EncodeToString(mac.Sum(nil)))
	return r
}

// forgery returns forged delivery n of c, of one of several kinds: signed
// with another secret, a genuine signature over a tampered body, no
// signature at all, and signed outside the platform's window.
func (c platformCase) forgery(genuine *platformtest.Signer, n int) *http.Request {
	other := platformtest.NewSigner(c.signer, fmt.Sprint("forger-", n))
	kinds := []func() *http.Request{
		func() *http.Request { return c.deliver(other, n, platformNow) },
		func() *http.Request { // nothing signed: no query, no signature header
			r := c.deliver(genuine, n, platformNow)
			r.URL.RawQuery, r.RequestURI = "", "/hook"
			for k := range r.Header {
				if k != "Content-Type" && k != "X-Github-Delivery" && k != "Webhook-Id" {
					r.Header.Del(k)
				}
			}
			return r
		},
	}
	if c.bodySigned {
		kinds = append(kinds, func() *http.Request {
			r := c.deliver(genuine, n, platformNow)
			body := mustBody(r)
			body[len(body)/2] ^= 1
			r.Body = io.NopCloser(bytes.NewReader(body))
			return r
		})
	}
	if c.stale {
		kinds = append(kinds, func() *http.Request { return c.deliver(genuine, n, platformNow.Add(-48*time.Hour)) })
	}
	return kinds[n%len(kinds)]()
}

// countingQueue is a real queue that counts the pushes made to it.
type countingQueue struct {
	queue.Queue
	pushes, added atomic.Int64
}

func (q *countingQueue) Push(ctx context.Context, m queue.Message) (string, bool, error) {
	q.pushes.Add(1)
	id, added, err := q.Queue.Push(ctx, m)
	if added {
		q.added.Add(1)
	}
	return id, added, err
}

// TestPlatformsMiddlewareAndAsync serves every single-message preset of
// issue 36 through New, NewAsync and NewAsync with a SQLite queue: three
// messages, each delivered three times (re-signed, as a redelivery is), run
// the handler once each; 200 forgeries get 401 with no store call and no
// push.
func TestPlatformsMiddlewareAndAsync(t *testing.T) {
	const messages, forgeries = 3, 200
	for name, c := range platformCases(t) {
		for _, mode := range []string{"middleware", "async", "queue"} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				seed := "the-secret-of-" + name
				s := platformtest.NewSigner(c.signer, seed)
				p := s.Preset(c.preset)
				if c.signer == "rule" {
					p = c.preset.WithSecret(seed)
				}
				p.AckBudget = 0 // a copy in flight is answered at once
				store := &countingStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
				srv := newPlatformServer(t, mode, dedupe.New(store), p)
				for n := range forgeries {
					w := httptest.NewRecorder()
					srv.h.ServeHTTP(w, c.forgery(s, n))
					require.Equal(t, http.StatusUnauthorized, w.Code, "forgery %d: %s", n, w.Body)
				}
				assert.Zero(t, store.calls.Load(), "store calls for forgeries")
				assert.Zero(t, srv.pushes(), "queue pushes for forgeries")
				for i := range messages {
					for try := range 3 {
						w := httptest.NewRecorder()
						srv.h.ServeHTTP(w, c.deliver(s, i, platformNow.Add(time.Duration(try)*time.Second)))
						require.Less(t, w.Code, 300, "message %d try %d: %s", i, try, w.Body)
						if try == 0 && mode != "middleware" {
							require.Equal(t, "queued", w.Header().Get(dedupehttp.HeaderVerdict))
							srv.waitDone(t)
						}
						if try > 0 {
							require.Contains(t, []string{"duplicate", "replayed"}, w.Header().Get(dedupehttp.HeaderVerdict))
						}
					}
				}
				srv.close(t)
				assert.Len(t, srv.runs, messages, "keys run")
				for k, n := range srv.runs {
					assert.Equal(t, 1, n, "runs of %s", k)
				}
			})
		}
	}
}

// platformServer is a preset served one way, with the handler's runs.
type platformServer struct {
	h      http.Handler
	q      *countingQueue
	a      *dedupehttp.Async
	done   chan ended
	mu     sync.Mutex
	runs   map[string]int
	closed bool
}

func newPlatformServer(t *testing.T, mode string, d *dedupe.Deduper, p platform.Preset) *platformServer {
	s := &platformServer{runs: map[string]int{}, done: make(chan ended, 16)}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := dedupehttp.KeyFrom(r.Context())
		s.mu.Lock()
		s.runs[k.String()]++
		s.mu.Unlock()
		_, _ = w.Write([]byte("success"))
	})
	clock := dedupehttp.WithClock(func() time.Time { return platformNow })
	switch mode {
	case "middleware":
		s.h = dedupehttp.New(d, p, h, clock, dedupehttp.WithLogger(quiet))
		return s
	case "queue":
		sq, err := queue.OpenSQLite(filepath.Join(t.TempDir(), "queue.db"), queue.SQLiteConfig{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = sq.Close() })
		s.q = &countingQueue{Queue: sq}
		s.a = dedupehttp.NewAsync(d, dedupehttp.FromPreset(p), h, clock, dedupehttp.WithLogger(quiet),
			dedupehttp.WithDone(doneTo(s.done)), dedupehttp.WithQueue(s.q), dedupehttp.WithWorkers(2))
	default:
		s.a = dedupehttp.NewAsync(d, dedupehttp.FromPreset(p), h, clock, dedupehttp.WithLogger(quiet),
			dedupehttp.WithDone(doneTo(s.done)))
	}
	s.h = s.a
	t.Cleanup(func() { s.close(t) })
	return s
}

// waitDone waits until the Async reports a message processed.
func (s *platformServer) waitDone(t *testing.T) {
	select {
	case e := <-s.done:
		require.NoError(t, e.err)
	case <-time.After(time.Minute):
		t.Fatal("the queued message was not processed within a minute")
	}
}

func (s *platformServer) pushes() int64 {
	if s.q == nil {
		return 0
	}
	return s.q.pushes.Load()
}

func (s *platformServer) close(t *testing.T) {
	if s.a != nil && !s.closed {
		s.closed = true
		require.NoError(t, s.a.Close(context.Background()))
	}
}
