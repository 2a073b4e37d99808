package dedupegotelegram

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/gatewaykit/dedupe/reply"
	"github.com/go-telegram/bot"
)

// SendMessage returns a [reply.SendFunc] that sends a reply with b's
// sendMessage: params as given (ChatID, ParseMode, ReplyParameters,
// ReplyMarkup, …) with the reply's body as its Text. For a [reply.Sender]
// of [reply.Telegram]:
//
//	sender := reply.New(store, reply.Telegram) // at most once
//	compose := func(ctx context.Context) ([]byte, error) { return []byte(answer), nil }
//	rc, err := sender.Send(ctx, key, 0, compose,
//		dedupegotelegram.SendMessage(b, bot.SendMessageParams{ChatID: update.Message.Chat.ID}))
//
// The Bot API takes no idempotency token on sendMessage
// (https://core.telegram.org/bots/api#sendmessage), and a bot cannot read a
// chat's history back, so a send whose outcome is unknown (a timeout, a 5xx,
// a cut connection) is, by the Sender's policy, either not sent again
// ([reply.AtMostOnce], the preset's: Send returns [reply.ErrMaybeLost]) or
// sent again ([reply.AtLeastOnce] with [reply.WithPolicy]: the receipt says
// MaybeDuplicate). An error the Bot API answered (bot.ErrorBadRequest,
// ErrorForbidden, ErrorUnauthorized, ErrorNotFound, ErrorConflict, a
// *bot.TooManyRequestsError, a *bot.MigrateError) or a failure to connect is
// [reply.NotSent]. The id is the message_id.
func SendMessage(b *bot.Bot, params bot.SendMessageParams) reply.SendFunc {
	return func(ctx context.Context, m reply.Message) (string, error) {
		p := params
		p.Text = string(m.Body)
		msg, err := b.SendMessage(ctx, &p)
		if err != nil {
			return "", outcome(fmt.Errorf("dedupegotelegram: sendMessage: %w", err))
		}
		if msg == nil {
			return "", nil
		}
		return strconv.Itoa(msg.ID), nil
	}
}

// outcome classifies an error of a Bot API call: answered errors and
// failures to connect are [reply.NotSent], the rest unknown.
func outcome(err error) error {
	var tooMany *bot.TooManyRequestsError
	var migrate *bot.MigrateError
	var op *net.OpError
	switch {
	case errors.Is(err, bot.ErrorBadRequest), errors.Is(err, bot.ErrorForbidden),
		errors.Is(err, bot.ErrorUnauthorized), errors.Is(err, bot.ErrorNotFound),
		errors.Is(err, bot.ErrorConflict), errors.As(err, &tooMany), errors.As(err, &migrate),
		errors.As(err, &op) && op.Op == "dial":
		return reply.NotSent(err)
	}
	return err
}
