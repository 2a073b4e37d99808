package dedupediscordgo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/bwmarrin/discordgo"
	"github.com/gatewaykit/dedupe/reply"
)

// SendMessage returns a [reply.SendFunc] that posts a reply to the channel
// channelID through the session s, with the reply's token as the message's
// nonce and enforce_nonce true, for a [reply.Sender] of [reply.Discord]:
//
//	sender := reply.New(store, reply.Discord)
//	compose := func(ctx context.Context) ([]byte, error) {
//		return json.Marshal(&discordgo.MessageSend{Content: answer})
//	}
//	rc, err := sender.Send(ctx, key, 0, compose, dedupediscordgo.SendMessage(s, m.ChannelID))
//
// The body is Create Message's JSON params, the json.Marshal of a
// *discordgo.MessageSend (its Files are not sent: they are not JSON). Its
// members nonce and enforce_nonce are replaced. discordgo v0.28.1's
// MessageSend has no Nonce or EnforceNonce field, so the request is made with
// the session's [discordgo.Session.RequestWithBucketID] (its rate limiter,
// its retries of a 502, which send the same nonce again, and its token).
//
// Discord documents enforce_nonce in Create Message
// (https://discord.com/developers/docs/resources/message#create-message): if
// another message was created by the same author with the same nonce in the
// past few minutes, that message is returned and no new message is created.
// The outcome of a send is: a message back, sent (its id); a 4xx
// ([discordgo.RESTError] with a 4xx Response, 429 included) or a failure to
// connect, [reply.NotSent]; a 5xx, a timeout, a cut connection, unknown.
func SendMessage(s *discordgo.Session, channelID string) reply.SendFunc {
	endpoint := discordgo.EndpointChannelMessages(channelID)
	return func(ctx context.Context, m reply.Message) (string, error) {
		var params map[string]json.RawMessage
		if err := json.Unmarshal(m.Body, &params); err != nil || params == nil {
			return "", reply.NotSent(fmt.Errorf("dedupediscordgo: the reply's body is not a JSON object: %v", err))
		}
		nonce := m.Token
		if nonce == "" {
			nonce = reply.Nonce(m.Key, m.Slot)
		}
		params["nonce"], _ = json.Marshal(nonce)
		params["enforce_nonce"] = json.RawMessage("true")
		body, err := s.RequestWithBucketID(http.MethodPost, endpoint, params, endpoint, discordgo.WithContext(ctx))
		if err != nil {
			return "", outcome(err)
		}
		var msg discordgo.Message
		_ = json.Unmarshal(body, &msg) // sent whatever the answer: the id is a courtesy
		return msg.ID, nil
	}
}

// outcome classifies an error of a discordgo request: a 4xx or a failure to
// connect is [reply.NotSent]; anything else leaves the outcome unknown.
func outcome(err error) error {
	err = fmt.Errorf("dedupediscordgo: create message: %w", err)
	var rest *discordgo.RESTError
	if errors.As(err, &rest) && rest.Response != nil && rest.Response.StatusCode/100 == 4 {
		return reply.NotSent(err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return reply.NotSent(err)
	}
	return err
}
