package reply_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe/reply"
)

// outcome is what the test platform does with one send.
type outcome int

const (
	accept     outcome = iota // accepts the message and answers
	acceptLost                // accepts the message, then its answer is lost (a timeout after accepting, a 5xx)
	lostBefore                // the request is lost before the platform sees it: outcome unknown to the sender
	refuse                    // refuses the message (a 4xx): NotSent
)

// errTimeout is the error of a send whose answer never came.
var errTimeout = errors.New("platform: timeout")

// platform is a small chat platform that records the messages a user sees.
// With honour set it drops a repeat of a token it accepted within window,
// answering with the first message's id, as LINE, Discord and Feishu
// document.
type platform struct {
	honour bool
	window time.Duration
	now    func() time.Time

	mu       sync.Mutex
	script   []outcome            // the outcomes of the next sends; then accept
	accepted map[string]time.Time // token → when first accepted
	ids      map[string]string    // token → its message's id
	shown    [][]byte             // what the user saw, in order
	sends    int                  // requests received
}

func newPlatform(honour bool, window time.Duration, now func() time.Time) *platform {
	return &platform{honour: honour, window: window, now: now,
		accepted: map[string]time.Time{}, ids: map[string]string{}}
}

// then queues the outcomes of the next sends.
func (p *platform) then(o ...outcome) {
	p.mu.Lock()
	p.script = append(p.script, o...)
	p.mu.Unlock()
}

// send is the SendFunc of the platform.
func (p *platform) send(ctx context.Context, m reply.Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	o := accept
	if len(p.script) > 0 {
		o, p.script = p.script[0], p.script[1:]
	}
	switch o {
	case lostBefore:
		return "", errTimeout
	case refuse:
		p.sends++
		return "", reply.NotSent(errors.New("platform: 400 bad request"))
	}
	p.sends++
	id, dup := p.ids[m.Token]
	if !p.honour || m.Token == "" || !dup || p.now().Sub(p.accepted[m.Token]) >= p.window {
		p.shown = append(p.shown, m.Body)
		id = "msg-" + strconv.Itoa(len(p.shown))
		if m.Token != "" {
			p.accepted[m.Token], p.ids[m.Token] = p.now(), id
		}
	}
	if o == acceptLost {
		return "", errTimeout
	}
	return id, nil
}

// seen returns how many messages the user saw.
func (p *platform) seen() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.shown)
}
