// Package multibot runs a gateway whose bots share chats: several bot accounts,
// through one or more adapters, deliver the same group traffic to one core.
//
// A [Registry] knows the gateway's own bots, which the loop guard
// ([Registry.IsBotLoop]) and the choice of a reply bot
// ([Dispatcher.PickReplyBot]) use. A [Dispatcher] observes every delivery with
// a [dedupe.EventCorrelator], drops bot loops, and runs the [EventHandler]s
// whose routes match: a normal route sees each logical event once, a route
// prefixed with '!' sees every copy.
//
// The package uses only the correlator's exported API: what a handler needs to
// know about a delivery's group comes in its [dedupe.Observation].
package multibot
