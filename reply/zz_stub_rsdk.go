package reply

// TEMPORARY: a stand-in for the reply core that branch rcore builds
// (/work/briefs/reply-api.md), so that the send helpers of branch rsdk
// compile and their tests run before rcore lands. Deleted by the merge of
// rcore.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/big"
	"strconv"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Policy is a stand-in.
type Policy int

// Policies: stand-ins.
const (
	Native Policy = iota + 1
	AtMostOnce
	AtLeastOnce
)

// Platform is a stand-in.
type Platform struct {
	Name   string
	Policy Policy
	Window time.Duration
	Token  func(key dedupe.Key, slot int) string
}

// Presets: stand-ins.
var (
	LINE     = Platform{Name: "line", Policy: Native, Window: 24 * time.Hour, Token: UUID}
	Discord  = Platform{Name: "discord", Policy: Native, Window: 2 * time.Minute, Token: Nonce}
	Feishu   = Platform{Name: "feishu", Policy: Native, Window: time.Hour, Token: UUID}
	Telegram = Platform{Name: "telegram", Policy: AtMostOnce}
	Slack    = Platform{Name: "slack", Policy: AtMostOnce}
)

// Message is a stand-in.
type Message struct {
	Key     dedupe.Key
	Slot    int
	Token   string
	Body    []byte
	Attempt int
}

// SendFunc is a stand-in.
type SendFunc func(ctx context.Context, m Message) (id string, err error)

// Receipt is a stand-in.
type Receipt struct {
	ID             string
	Token          string
	Attempts       int
	Sent           bool
	MaybeDuplicate bool
}

// Sender is a stand-in.
type Sender struct{ p Platform }

// Option is a stand-in.
type Option func(*Sender)

// WithPolicy is a stand-in.
func WithPolicy(p Policy) Option { return func(s *Sender) { s.p.Policy = p } }

// WithCheck is a stand-in.
func WithCheck(check func(ctx context.Context, m Message) (id string, found bool, err error)) Option {
	return func(*Sender) {}
}

// New is a stand-in.
func New(store dedupe.Store, p Platform, opts ...Option) *Sender {
	s := &Sender{p: p}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Send is a stand-in: it sends once and records nothing.
func (s *Sender) Send(ctx context.Context, key dedupe.Key, slot int,
	compose func(ctx context.Context) ([]byte, error), send SendFunc) (Receipt, error) {
	body, err := compose(ctx)
	if err != nil {
		return Receipt{}, err
	}
	tok := ""
	if s.p.Token != nil {
		tok = s.p.Token(key, slot)
	}
	id, err := send(ctx, Message{Key: key, Slot: slot, Token: tok, Body: body, Attempt: 1})
	if err != nil {
		return Receipt{}, err
	}
	return Receipt{ID: id, Token: tok, Attempts: 1, Sent: true}, nil
}

// notSent is an error a [SendFunc] marked with [NotSent].
type notSent struct{ err error }

func (e *notSent) Error() string { return e.err.Error() }
func (e *notSent) Unwrap() error { return e.err }

// NotSent is a stand-in.
func NotSent(err error) error {
	if err == nil {
		return nil
	}
	return &notSent{err: err}
}

// IsNotSent is a stand-in.
func IsNotSent(err error) bool {
	var ns *notSent
	return errors.As(err, &ns)
}

func digest(key dedupe.Key, slot int) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	put := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	put("dedupe.reply.v1")
	put(key.Channel)
	put(key.MessageID)
	put(strconv.Itoa(slot))
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// UUID is a stand-in.
func UUID(key dedupe.Key, slot int) string {
	d := digest(key, slot)
	u := d[:16]
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:16])
	return string(b[:])
}

// Nonce is a stand-in.
func Nonce(key dedupe.Key, slot int) string {
	d := digest(key, slot)
	s := new(big.Int).SetBytes(d[:16]).Text(36)
	for len(s) < 25 {
		s = "0" + s
	}
	return s
}
