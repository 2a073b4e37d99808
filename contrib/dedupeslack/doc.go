// Package dedupeslack runs each Slack event that a slack-go app
// (github.com/slack-go/slack) receives once, with a [dedupe.Deduper],
// however often Slack delivers it: Slack retries an event whose delivery was
// not answered or acknowledged in time, up to three times, and two gateway
// replicas may each receive a copy.
//
// Over HTTP (the Events API), [EventsAPI] wraps the function that processes a
// parsed [slackevents.EventsAPIEvent]:
//
//	handle := dedupeslack.EventsAPI(d, "slack", onEvent)
//	// in the request handler, after the signature check and slackevents.ParseEvent:
//	w.WriteHeader(dedupeslack.StatusCode(handle(r.Context(), ev))) // not 2xx: Slack retries
//
// Over Socket Mode, [SocketMode] wraps a handler of the socketmode package
// and acknowledges the envelopes itself:
//
//	h := socketmode.NewSocketmodeHandler(client)
//	h.HandleEvents(slackevents.AppMention, dedupeslack.SocketMode(d, "slack", onMention))
//	h.RunEventLoopContext(ctx)
//
// # Keys
//
// The key of an event is {channel}:{event_id}. Slack gives each event an
// event_id that its retries keep (a Socket Mode retry comes in a new envelope,
// with a new envelope_id and a higher retry_attempt, but the same event_id).
// Each app receives events of its own; give each app that shares a store a
// channel of its own all the same, for example "slack-support".
//
// # Verdicts
//
// The handler's result decides as in [dedupe.Deduper.Do]: nil marks the event
// processed, an error (or a panic) releases it. A duplicate is dropped:
// answered 200 over HTTP, acknowledged over Socket Mode, so that Slack stops
// retrying. A retry that arrives while its first delivery is processed waits
// for that one's outcome, up to [platform.Slack]'s AckBudget: it is answered
// as a duplicate if the first succeeded, processed if the first failed, and
// if the first is still running, answered 503 over HTTP (see [StatusCode]) or
// left unacknowledged over Socket Mode, for Slack to send it again later;
// neither is counted as a failure.
//
// # What a release leads to
//
// Slack acknowledges nothing on the app's behalf, so a released event is
// delivered again in both modes: a handler error is answered 500 over HTTP
// and left unacknowledged over Socket Mode, and Slack retries the event up
// to three times ("nearly immediately", after 1 minute and after 5 minutes),
// with the same event_id; the retry is processed. After the third retry
// Slack gives up. An HTTP endpoint may also be served by package dedupehttp
// with [platform.Slack] given the signing secret, which verifies the
// signature and answers as here.
//
// This package is a module of its own, github.com/gatewaykit/dedupe/contrib/dedupeslack,
// so that only its users download slack-go.
package dedupeslack
