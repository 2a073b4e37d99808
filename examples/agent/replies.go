package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/gatewaykit/dedupe/reply/replytest"
)

// inbound is a platform's webhook delivery of a user's message, as the
// chat gateway reads it.
type inbound struct {
	ID   string `json:"id"`   // the platform's message id: the dedupe key's
	Chat string `json:"chat"` // where the reply goes
	Text string `json:"text"`
}

// outcome is what the gateway did with one delivery of a message.
type outcome struct {
	Copy      bool `json:"copy"`       // it was a copy of a processed message (ErrDuplicate)
	Attempts  int  `json:"attempts"`   // the reply's sends so far
	MaybeLost bool `json:"maybe_lost"` // reported possibly lost (AtMostOnce after an unknown outcome)
	MaybeDup  bool `json:"maybe_dup"`  // reported possibly duplicated (AtLeastOnce sent again)
	// Resumed: the message was processed again and its reply's record said
	// sent: an earlier run sent it and ended (died) before the message's mark.
	Resumed bool `json:"resumed"`
}

// platforms are the presets of the platforms the fake serves, by name.
var platforms = map[string]reply.Platform{
	replytest.LINE: reply.LINE, replytest.Discord: reply.Discord,
	replytest.Feishu: reply.Feishu, replytest.Telegram: reply.Telegram,
}

// parsePolicy reads -policy: "" keeps the platform's.
func parsePolicy(s string) (reply.Policy, error) {
	for _, p := range []reply.Policy{reply.Native, reply.AtMostOnce, reply.AtLeastOnce} {
		if s == p.String() {
			return p, nil
		}
	}
	if s == "" {
		return 0, nil
	}
	return 0, fmt.Errorf("-policy %q: want native, at-most-once or at-least-once", s)
}

// replier is the chat gateway's way from a delivered message to its reply:
// the delivery goes through the Deduper, the model is asked for the reply
// once (the reply's record keeps it), and the reply goes out through a
// reply.Sender to the platform.
type replier struct {
	channel string // the dedupe channel of the messages: the platform's name, or a test's lane
	policy  reply.Policy
	d       *dedupe.Deduper
	sender  *reply.Sender
	client  replytest.Client
	name    string // the platform's, as replytest names it
	model   func(ctx context.Context, in inbound) ([]byte, error)
}

// replierConfig is what a replier is built from.
type replierConfig struct {
	channel, platform, policy string
	store                     dedupe.Store
	d                         *dedupe.Deduper
	platformURL               string
	timeout, lease            time.Duration // of a send call; of the reply's lock (0: the default)
	window                    time.Duration // how long the platform honours a token, if not the preset's
	model                     func(ctx context.Context, in inbound) ([]byte, error)
}

// newReplier builds a replier for platform (replytest's names), replying to
// the fake platform at platformURL, whose calls time out after timeout.
func newReplier(c replierConfig) (*replier, error) {
	p, ok := platforms[c.platform]
	if !ok {
		return nil, fmt.Errorf("-platform %q: want line, discord, feishu or telegram", c.platform)
	}
	if c.window > 0 {
		p.Window = c.window
	}
	policy, err := parsePolicy(c.policy)
	if err != nil {
		return nil, err
	}
	opts := []reply.Option{reply.WithLease(c.lease)}
	if policy != 0 {
		opts = append(opts, reply.WithPolicy(policy))
	} else {
		policy = p.Policy
	}
	return &replier{channel: c.channel, policy: policy, d: c.d, sender: reply.New(c.store, p, opts...),
		client: replytest.Client{HTTP: &http.Client{Timeout: c.timeout}, BaseURL: c.platformURL, Auth: "agent-bot"},
		name:   c.platform, model: c.model}, nil
}

// handle processes one delivery of in: its first delivery asks the model and
// sends the reply; a copy sends nothing (or, if the reply's record says its
// send is unfinished, finishes it). An error means the platform should
// deliver it again.
func (g *replier) handle(ctx context.Context, in inbound) (outcome, error) {
	key := dedupe.Key{Channel: g.channel, MessageID: in.ID}
	var out outcome
	send, err := g.client.Send(g.name, in.Chat)
	if err != nil {
		return out, err
	}
	err = g.d.Do(ctx, key, func(ctx context.Context) error {
		r, err := g.sender.Send(ctx, key, 0, func(ctx context.Context) ([]byte, error) { return g.model(ctx, in) }, send)
		if errors.Is(err, reply.ErrMaybeLost) { // the policy's end: reported, and the message processed
			out.Attempts, out.MaybeLost = r.Attempts, true
			return nil
		}
		out.Attempts, out.MaybeDup = r.Attempts, r.MaybeDuplicate || (g.policy == reply.AtLeastOnce && r.Attempts > 1)
		out.Resumed = err == nil && !r.Sent
		return err
	})
	if !errors.Is(err, dedupe.ErrDuplicate) {
		return out, err
	}
	// A copy of a processed message: its reply was sent, or reported, when it
	// was processed; the record says which.
	out = outcome{Copy: true}
	rs, err := g.sender.Flush(ctx, key, send)
	if errors.Is(err, reply.ErrMaybeLost) {
		out.MaybeLost = true
		err = nil
	}
	if len(rs) > 0 {
		out.Attempts = rs[0].Attempts
		out.MaybeDup = g.policy == reply.AtLeastOnce && rs[0].Attempts > 1
	}
	return out, err
}
