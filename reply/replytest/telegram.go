package replytest

import (
	"context"
	"errors"
	"testing"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/reply"
)

// TelegramSend returns the [reply.SendFunc] under test: a Telegram client
// library's sendMessage to chat through the Bot API at baseURL (a [Server]'s
// URL), with an HTTP client that times out within a few seconds. It fails t
// if it cannot make one.
type TelegramSend func(t *testing.T, baseURL string, chat int64) reply.SendFunc

// RunTelegram tests send, a Telegram client library's SendFunc for a
// [reply.Sender] of [reply.Telegram], on a [Server] per test. A call the
// Bot API refuses ([Reject]: 400, [Throttle]: 429) must be [reply.NotSent],
// and the next Send sends the reply; a 5xx before posting ([FailBefore]), a
// 502 HTML page after posting ([BadGateway]) or no answer ([Hang]) must
// leave the outcome unknown: at most once does not send the reply again
// (Send returns [reply.ErrMaybeLost]), at least once sends it again (the
// receipt says MaybeDuplicate). A reply sent is sent once, its id the
// message_id.
func RunTelegram(t *testing.T, send TelegramSend) {
	t.Run("outcomes", func(t *testing.T) {
		for _, x := range []struct {
			fault   Fault
			notSent bool
			posted  int // by the first send
		}{{Reject, true, 0}, {Throttle, true, 0}, {FailBefore, false, 0}, {BadGateway, false, 1}, {Hang, false, 1}} {
			for _, policy := range []reply.Policy{reply.AtMostOnce, reply.AtLeastOnce} {
				t.Run(x.fault.String()+"/"+policy.String(), func(t *testing.T) {
					t.Parallel()
					telegramOutcome(t, send, x.fault, policy, x.notSent, x.posted)
				})
			}
		}
	})
	t.Run("sent", func(t *testing.T) {
		api := startTelegram(t)
		sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Telegram)
		rc, err := sender.Send(context.Background(), telegramKey, 0, pong, send(t, api.URL(), 7))
		if err != nil || rc.ID != "1" {
			t.Fatalf("Send = %+v, %v; want sent, id 1", rc, err)
		}
		rc, err = sender.Send(context.Background(), telegramKey, 0, pong, send(t, api.URL(), 7))
		if err != nil || rc.Sent {
			t.Fatalf("second Send = %+v, %v; want the first's receipt, not sent", rc, err)
		}
		if n := len(api.Messages()); n != 1 || api.Count("7", "pong") != 1 {
			t.Fatalf("the chat holds %d messages, want 1 pong", n)
		}
	})
}

// telegramOutcome sends a reply whose first call takes fault, then sends it
// again, by policy.
func telegramOutcome(t *testing.T, send TelegramSend, fault Fault, policy reply.Policy, notSent bool, posted int) {
	api := startTelegram(t)
	api.Next(fault)
	sf := send(t, api.URL(), 7)
	sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Telegram, reply.WithPolicy(policy))
	_, err := sender.Send(context.Background(), telegramKey, 0, pong, sf)
	if err == nil || reply.IsNotSent(err) != notSent {
		t.Fatalf("first Send: error %v, want one with NotSent %v", err, notSent)
	}
	if n := api.Count("7", "pong"); n != posted {
		t.Fatalf("first Send posted %d, want %d", n, posted)
	}
	rc, err := sender.Send(context.Background(), telegramKey, 0, nil, sf)
	want := posted + 1
	switch {
	case notSent:
		if err != nil || rc.MaybeDuplicate {
			t.Fatalf("second Send = %+v, %v; want sent, no duplicate", rc, err)
		}
	case policy == reply.AtMostOnce:
		if !errors.Is(err, reply.ErrMaybeLost) {
			t.Fatalf("second Send: error %v, want reply.ErrMaybeLost", err)
		}
		want = posted
	default:
		if err != nil || !rc.MaybeDuplicate {
			t.Fatalf("second Send = %+v, %v; want sent, MaybeDuplicate", rc, err)
		}
	}
	if n := api.Count("7", "pong"); n != want {
		t.Fatalf("after the second Send the chat holds %d, want %d", n, want)
	}
}

// telegramKey is the message the replies of RunTelegram answer.
var telegramKey = dedupe.Key{Channel: "telegram", MessageID: "8817"}

// pong composes the reply of RunTelegram.
func pong(context.Context) ([]byte, error) { return []byte("pong"), nil }

// startTelegram serves a Server for t.
func startTelegram(t *testing.T) *Server {
	t.Helper()
	s := New(Config{})
	if _, err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
