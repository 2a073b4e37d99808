package dedupediscordgo_test

import (
	"fmt"

	"github.com/bwmarrin/discordgo"
	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupediscordgo"
)

func ExampleMessageCreate() {
	d := dedupe.New(nil) // a memory store; Redis or PostgreSQL for several processes
	onMessage := dedupediscordgo.MessageCreate(d, "discord", func(s *discordgo.Session, m *discordgo.MessageCreate) error {
		fmt.Println("handled message", m.ID, m.Content)
		return nil
	})

	// A bot calls s.AddHandler(onMessage) and s.Open(); here, the event as the
	// gateway delivers it, and again in a replay after a RESUME.
	m := &discordgo.MessageCreate{Message: &discordgo.Message{ID: "1187654321098765432", Content: "hi"}}
	onMessage(nil, m)
	onMessage(nil, m)
	fmt.Println(d.Stats().Duplicates, "duplicate")
	// Output:
	// handled message 1187654321098765432 hi
	// 1 duplicate
}

func ExampleInteractionCreate() {
	s, err := discordgo.New("Bot " + "token")
	if err != nil {
		panic(err)
	}
	d := dedupe.New(nil)
	s.AddHandler(dedupediscordgo.InteractionCreate(d, "discord", func(s *discordgo.Session, i *discordgo.InteractionCreate) error {
		// An error releases the interaction, so that a copy is answered.
		return s.InteractionRespond(i.Interaction, &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: "pong"},
		})
	}))
	if err := s.Open(); err != nil {
		panic(err)
	}
	defer s.Close()
}
