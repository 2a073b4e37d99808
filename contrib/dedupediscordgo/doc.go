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
// processed, an error (or a panic) releases it. The session has no channel
// for the wrapper's own verdicts: duplicates are dropped, and so is an event
// whose claim failed in the store (the Deduper logs that, see
// [dedupe.WithLogger], and counts it in [dedupe.Deduper.Stats]). A copy that
// arrives while another is processed waits for that one's outcome, up to
// [platform.Discord]'s AckBudget: it is dropped if the first succeeded, runs
// if the first failed, and is dropped if the first is still running.
//
// # What a release leads to
//
// The gateway has no acknowledgement of an event, and Discord never sends an
// event again because its handler failed. A released event is processed only
// if a copy of it comes anyway: one waiting for it (above), a replay after a
// RESUME (the gateway replays what the session missed, not what its
// handlers failed), or the copy of another process or shard of the bot.
//
// # Interactions over HTTP
//
// This package serves the gateway websocket. An application that receives
// interactions at an Interactions Endpoint URL serves them with package
// dedupehttp and [platform.Discord] given the application's public key,
// which verifies each request's signature (401 for a forgery, before
// anything is stored), refuses a stale timestamp, passes the PING to the
// handler and answers each copy with the first copy's interaction response,
// replayed (see dedupehttp.WithReplay and the example):
//
//	discord := platform.Discord.WithSecret(os.Getenv("DISCORD_PUBLIC_KEY"))
//	http.Handle("POST /discord/interactions", dedupehttp.New(d, discord, handler))
//
// This package is a module of its own, github.com/gatewaykit/dedupe/contrib/dedupediscordgo,
// so that only its users download discordgo.
package dedupediscordgo
