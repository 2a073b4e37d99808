// Package multibot runs a gateway whose bots share chats: several bot accounts,
// through one or more adapters, deliver the same group traffic to one core.
//
// Make a [Dispatcher] over a [dedupe.EventCorrelator] with [NewDispatcher],
// register the gateway's bots in its [Registry] ([Dispatcher.Bots]), add
// handlers with [Dispatcher.Handle], and give it every delivery with
// [Dispatcher.Dispatch]. ExampleDispatcher, in example_test.go, is this
// program, compiled and run by go test.
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
