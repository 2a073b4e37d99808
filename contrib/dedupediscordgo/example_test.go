package dedupediscordgo_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"github.com/bwmarrin/discordgo"
	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupediscordgo"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
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

// Interactions that Discord posts to an Interactions Endpoint URL are served
// by package dedupehttp with platform.Discord, not by this package: it
// verifies each request's Ed25519 signature with the application's public
// key (401 for a forgery, before anything is stored), refuses a stale
// timestamp, passes the PING to the handler, and answers each copy of an
// interaction with the first copy's response, replayed (dedupehttp.WithReplay).
func Example_interactionsEndpoint() {
	d := dedupe.New(nil)
	discord := platform.Discord.WithSecret(os.Getenv("DISCORD_PUBLIC_KEY"))
	http.Handle("POST /discord/interactions", dedupehttp.New(d, discord,
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var in discordgo.Interaction
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			resp := discordgo.InteractionResponse{Type: discordgo.InteractionResponsePong}
			if in.Type != discordgo.InteractionPing {
				resp = discordgo.InteractionResponse{
					Type: discordgo.InteractionResponseChannelMessageWithSource,
					Data: &discordgo.InteractionResponseData{Content: "pong"},
				}
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(resp)
		})))
}
