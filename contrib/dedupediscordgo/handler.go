package dedupediscordgo

import (
	"context"

	"github.com/bwmarrin/discordgo"
	"github.com/gatewaykit/dedupe"
)

// DefaultChannel is the key channel of [MessageCreate] and
// [InteractionCreate] given an empty one.
const DefaultChannel = "discord"

// MessageCreate returns a handler for [discordgo.Session.AddHandler] that runs
// h for each MESSAGE_CREATE event under [dedupe.Deduper.Do], keyed by the
// message's id in channel ([DefaultChannel] if empty; it must be a valid
// [dedupe.Key] channel). h's error releases the message; the handler drops
// duplicates, copies in flight and messages whose claim failed without
// running h. An event without a message id runs h without deduplication.
//
// opts apply over d's options for this handler alone (see
// [dedupe.Deduper.With]), for example [dedupe.WithTTL] or [dedupe.WithWait].
// The handler is safe for concurrent use, as the session runs handlers in
// goroutines of their own; the context of its store calls is
// [context.Background], since discordgo handlers get none.
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
	if len(opts) > 0 {
		d = d.With(opts...)
	}
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
