package dedupetgbotapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/gatewaykit/dedupe/reply"
	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// SendMessage returns a [reply.SendFunc] that sends a reply with b.Send: msg
// as given (ChatID, ParseMode, ReplyToMessageID, ReplyMarkup, …) with the
// reply's body as its Text. For a [reply.Sender] of [reply.Telegram]:
//
//	sender := reply.New(store, reply.Telegram) // at most once
//	compose := func(ctx context.Context) ([]byte, error) { return []byte(answer), nil }
//	rc, err := sender.Send(ctx, key, 0, compose,
//		dedupetgbotapi.SendMessage(b, tgbotapi.NewMessage(update.Message.Chat.ID, "")))
//
// The Bot API takes no idempotency token on sendMessage
// (https://core.telegram.org/bots/api#sendmessage), and a bot cannot read a
// chat's history back, so a send whose outcome is unknown (a timeout, a 5xx,
// a cut connection) is, by the Sender's policy, either not sent again
// ([reply.AtMostOnce], the preset's: Send returns [reply.ErrMaybeLost]) or
// sent again ([reply.AtLeastOnce] with [reply.WithPolicy]: the receipt says
// MaybeDuplicate). An error the Bot API answered with a 4xx code (a
// *tgbotapi.Error: 400, 403, 429, …) or a failure to connect is
// [reply.NotSent]. telegram-bot-api's Send takes no context: the bot's HTTP
// client's timeout bounds a send, and the context is checked only before it.
// The id is the message_id.
func SendMessage(b *tgbotapi.BotAPI, msg tgbotapi.MessageConfig) reply.SendFunc {
	return func(ctx context.Context, m reply.Message) (string, error) {
		if err := ctx.Err(); err != nil {
			return "", reply.NotSent(fmt.Errorf("dedupetgbotapi: send: %w", err))
		}
		c := msg
		c.Text = string(m.Body)
		sent, err := b.Send(c)
		if err != nil {
			return "", outcome(fmt.Errorf("dedupetgbotapi: send: %w", err))
		}
		return strconv.Itoa(sent.MessageID), nil
	}
}

// outcome classifies an error of telegram-bot-api's Send.
func outcome(err error) error {
	var te *tgbotapi.Error
	var op *net.OpError
	switch {
	case errors.As(err, &te) && te.Code >= 400 && te.Code < 500,
		errors.As(err, &op) && op.Op == "dial":
		return reply.NotSent(err)
	}
	return err
}
