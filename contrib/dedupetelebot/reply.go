package dedupetelebot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/gatewaykit/dedupe/reply"
	tele "gopkg.in/telebot.v3"
)

// Send returns a [reply.SendFunc] that sends a reply, its body as text, to
// the recipient to with b.Send and opts (a *telebot.SendOptions, a
// telebot.ParseMode, a *telebot.ReplyMarkup, …). For a [reply.Sender] of
// [reply.Telegram]:
//
//	sender := reply.New(store, reply.Telegram) // at most once
//	compose := func(ctx context.Context) ([]byte, error) { return []byte(answer), nil }
//	rc, err := sender.Send(ctx, key, 0, compose, dedupetelebot.Send(b, c.Chat()))
//
// The Bot API takes no idempotency token on sendMessage
// (https://core.telegram.org/bots/api#sendmessage), and a bot cannot read a
// chat's history back, so a send whose outcome is unknown (a timeout, a 5xx,
// a cut connection) is, by the Sender's policy, either not sent again
// ([reply.AtMostOnce], the preset's: Send returns [reply.ErrMaybeLost]) or
// sent again ([reply.AtLeastOnce] with [reply.WithPolicy]: the receipt says
// MaybeDuplicate). An error the Bot API answered with a 4xx code that telebot
// recognises (a *telebot.Error, a telebot.FloodError, a telebot.GroupError)
// or a failure to connect is [reply.NotSent]; an answer telebot does not
// recognise stays unknown. telebot's Send takes no context: the bot's HTTP
// client's timeout bounds a send, and the context is checked only before it.
// The id is the message_id.
func Send(b *tele.Bot, to tele.Recipient, opts ...any) reply.SendFunc {
	return func(ctx context.Context, m reply.Message) (string, error) {
		if err := ctx.Err(); err != nil {
			return "", reply.NotSent(fmt.Errorf("dedupetelebot: send: %w", err))
		}
		msg, err := b.Send(to, string(m.Body), opts...)
		if err != nil {
			return "", outcome(fmt.Errorf("dedupetelebot: send: %w", err))
		}
		if msg == nil {
			return "", nil
		}
		return strconv.Itoa(msg.ID), nil
	}
}

// outcome classifies an error of telebot's Send.
func outcome(err error) error {
	var te *tele.Error
	var flood tele.FloodError
	var group tele.GroupError
	var op *net.OpError
	switch {
	case errors.As(err, &te) && te.Code >= 400 && te.Code < 500,
		errors.As(err, &flood), errors.As(err, &group),
		errors.As(err, &op) && op.Op == "dial":
		return reply.NotSent(err)
	}
	return err
}
