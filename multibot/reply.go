package multibot

import (
	"github.com/gatewaykit/dedupe"
)

// BotsForEvent returns the deliveries of obs's logical event observed so far,
// in arrival order, including those that arrived after obs was made: which
// bots received it, and under which message ids. Without a correlator it
// returns obs.Participants. It takes constant time: the slice is shared and
// must not be modified.
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
// event not observed, pass the zero Observation. Its cost does not depend on
// how many bots delivered the event or are registered, beyond the bots ev
// mentions.
func (d *Dispatcher) PickReplyBot(ev *dedupe.Event, obs dedupe.Observation) dedupe.Participant {
	if m := d.bots.MentionedBots(ev); len(m) > 0 {
		if d.c != nil {
			if p, ok := d.c.Participant(obs, m[0].Adapter, m[0].ID); ok {
				return p
			}
		} else if p, ok := ownDelivery(obs, m[0]); ok {
			return p
		}
		return dedupe.Participant{Adapter: m[0].Adapter, BotID: m[0].ID}
	}
	if d.c != nil && len(obs.Participants) > 0 && d.bots.Contains(obs.Primary.Adapter, obs.Primary.BotID) {
		return obs.Primary
	}
	return self(ev)
}

// ownDelivery finds the bot's delivery in an observation made without a
// correlator, which holds only the delivery itself.
func ownDelivery(obs dedupe.Observation, b Bot) (dedupe.Participant, bool) {
	for _, p := range obs.Participants {
		if p.Adapter == b.Adapter && p.BotID == b.ID {
			return p, true
		}
	}
	return dedupe.Participant{}, false
}
