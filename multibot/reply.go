package multibot

import (
	"github.com/gatewaykit/dedupe"
)

// BotsForEvent returns the deliveries of obs's logical event observed so far,
// in arrival order, including those that arrived after obs was made: which
// bots received it, and under which message ids. Without a correlator it
// returns obs.Participants. The slice is shared and must not be modified.
func (d *Dispatcher) BotsForEvent(obs dedupe.Observation) []dedupe.Participant {
	if d.c == nil {
		return obs.Participants
	}
	return d.c.Participants(obs)
}

// PickReplyBot chooses the bot that should answer ev, whose observation is
// obs: the first mentioned registered bot (see [Registry.MentionedBots]), so
// the bot a user @-ed answers even when another bot's copy arrived first; else
// the primary delivery of ev's group, if its bot is still registered; else the
// bot that received ev. The MessageID is that bot's id for the message, for a
// quoted reply, when its copy has been observed, and empty otherwise. For an
// event not observed, pass the zero Observation.
func (d *Dispatcher) PickReplyBot(ev *dedupe.Event, obs dedupe.Observation) dedupe.Participant {
	if m := d.bots.MentionedBots(ev); len(m) > 0 {
		for _, p := range d.BotsForEvent(obs) {
			if p.Adapter == m[0].Adapter && p.BotID == m[0].ID {
				return p
			}
		}
		return dedupe.Participant{Adapter: m[0].Adapter, BotID: m[0].ID}
	}
	if d.c != nil && len(obs.Participants) > 0 && d.bots.Contains(obs.Primary.Adapter, obs.Primary.BotID) {
		return obs.Primary
	}
	return self(ev)
}
