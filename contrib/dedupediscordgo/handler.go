package dedupediscordgo

import (
	"context"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
)

// DefaultChannel is the key channel of [MessageCreate] and
// [InteractionCreate] given an empty one.
const DefaultChannel = "discord"

// StoreTimeout bounds each store call of [MessageCreate] and
// [InteractionCreate] (see [dedupe.WithStoreTimeout]) unless their options
// say otherwise: discordgo handlers get no context, and a store call without
// a deadline waits on a stalled server for as long as the driver lets it
// (pgx has no read timeout). It is half of [platform.Discord]'s AckBudget, so
// that an interaction can still be answered within Discord's 3 seconds.
const StoreTimeout = time.Second

// MessageCreate returns a handler for [discordgo.Session.AddHandler] that runs
// h for each MESSAGE_CREATE event under [dedupe.Deduper.Do], keyed by the
// message's id in channel ([DefaultChannel] if empty; it must be a valid
// [dedupe.Key] channel). h's error releases the message; the handler drops
// duplicates and messages whose claim failed without running h. An event
// without a message id runs h without deduplication.
//
// The handler follows [platform.Discord]: a copy of an event that another
// handler is processing (a replay after a RESUME, another process of the
// bot) waits up to its AckBudget (2 s) for that handler's outcome
// ([dedupe.WithWait]): dropped if the first succeeded, run if it failed, and
// dropped if the first is still running. Each store call is bounded by
// [StoreTimeout]. These replace d's own wait and store timeout; opts apply
// over them, and over d's other options, for this handler alone (see
// [dedupe.Deduper.With]). The handler is safe for concurrent use, as the
// session runs handlers in goroutines of their own.
func MessageCreate(d *dedupe.Deduper, channel string, h func(*discordgo.Session, *discordgo.MessageCreate) error, opts ...dedupe.Option) func(*discordgo.Session, *discordgo.MessageCreate) {
	return wrap(d, channel, opts, h, func(m *discordgo.MessageCreate) string {
		if m == nil || m.Message == nil {
			return ""
		}
		return m.ID
	})
}

// InteractionCreate returns a handler for [discordgo.Session.AddHandler] that
// runs h for each INTERACTION_CREATE event under [dedupe.Deduper.Do], keyed
// by the interaction's id in channel, as [MessageCreate] does for messages.
func InteractionCreate(d *dedupe.Deduper, channel string, h func(*discordgo.Session, *discordgo.InteractionCreate) error, opts ...dedupe.Option) func(*discordgo.Session, *discordgo.InteractionCreate) {
	return wrap(d, channel, opts, h, func(i *discordgo.InteractionCreate) string {
		if i == nil || i.Interaction == nil {
			return ""
		}
		return i.ID
	})
}

// wrap returns a discordgo handler that runs h under d.Do, keyed by the id
// that id finds in the event.
func wrap[E any](d *dedupe.Deduper, channel string, opts []dedupe.Option, h func(*discordgo.Session, E) error, id func(E) string) func(*discordgo.Session, E) {
	d = d.With(append([]dedupe.Option{
		dedupe.WithWait(platform.Discord.AckBudget),
		dedupe.WithStoreTimeout(StoreTimeout),
	}, opts...)...)
	if channel == "" {
		channel = DefaultChannel
	}
	return func(s *discordgo.Session, e E) {
		msgID := id(e)
		if msgID == "" {
			_ = h(s, e)
			return
		}
		_ = d.Do(context.Background(), dedupe.Key{Channel: channel, MessageID: msgID}, func(context.Context) error {
			return h(s, e)
		})
	}
}
