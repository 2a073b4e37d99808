package dedupediscordgo_test

import (
	"context"
	"encoding/json"
	"log"

	"github.com/bwmarrin/discordgo"
	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupediscordgo"
	"github.com/gatewaykit/dedupe/reply"
)

// A reply to a Discord message sent once: the Sender keeps a record of it in
// the store, and SendMessage posts it with the reply's nonce and
// enforce_nonce, so a send again after a timeout gets the first message back
// instead of posting a second one.
func ExampleSendMessage() {
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	sender := reply.New(store, reply.Discord)
	s, _ := discordgo.New("Bot " + "token")
	s.AddHandler(func(s *discordgo.Session, m *discordgo.MessageCreate) {
		key := dedupe.Key{Channel: "discord", MessageID: m.ID}
		compose := func(ctx context.Context) ([]byte, error) {
			return json.Marshal(&discordgo.MessageSend{Content: "pong", Reference: m.Reference()})
		}
		if _, err := sender.Send(context.Background(), key, 0, compose, dedupediscordgo.SendMessage(s, m.ChannelID)); err != nil {
			log.Print(err)
		}
	})
	_ = s.Open
}
