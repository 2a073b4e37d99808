// Package dedupediscordgo runs each Discord message and interaction that a
// discordgo session (github.com/bwmarrin/discordgo) receives once, with a
// [dedupe.Deduper], however often the gateway delivers it: a RESUME that
// replays events the bot had already handled, a second process or shard
// connected while a deployment rolls over, a restart.
//
//	d := dedupe.New(store)
//	s, _ := discordgo.New("Bot " + token)
//	s.AddHandler(dedupediscordgo.MessageCreate(d, "discord", onMessage))
//	s.AddHandler(dedupediscordgo.InteractionCreate(d, "discord", onInteraction))
//	s.Open()
//
// # Keys
//
// The key of a MESSAGE_CREATE is {channel}:{message id}, of an
// INTERACTION_CREATE {channel}:{interaction id}; both are snowflakes, unique
// across Discord, so one channel serves both. Every bot in a guild receives
// the guild's messages with the same ids, so two bots that share a store need
// two channels, for example "discord-support" and "discord-sales"; the
// processes and shards of one bot use one channel in all of them.
//
// # Verdicts
//
// A discordgo handler returns nothing, so the handlers wrapped here return an
// error, which decides as in [dedupe.Deduper.Do]: nil marks the event
// processed, an error (or a panic) releases it, so that a copy delivered later
// is processed. The session has no channel for the wrapper's own verdicts:
// duplicates and copies in flight are dropped, and so is an event whose claim
// failed in the store (the Deduper logs that, see [dedupe.WithLogger], and
// counts it in [dedupe.Deduper.Stats]). A copy that should wait for the
// outcome of the one in flight, and be processed if that one fails, needs
// [dedupe.WithWait].
//
// This package is a module of its own, github.com/gatewaykit/dedupe/contrib/dedupediscordgo,
// so that only its users download discordgo.
package dedupediscordgo
