package multibot_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/multibot"
)

// BenchmarkDispatchManyBots measures one delivery of a message that n
// distinct registered bots deliver and that mentions one of them: Dispatch
// with a '!' handler that chooses the reply bot and lists the event's bots.
// The cost per delivery must not grow with n. The baseline is the same
// dispatch with a handler that does neither, so the difference is the cost
// of PickReplyBot and BotsForEvent.
func BenchmarkDispatchManyBots(b *testing.B) {
	for _, n := range []int{1, 10, 1000, 30000} {
		evs := make([]*dedupe.Event, n)
		mentioned := "bot" + strconv.Itoa(n/2)
		for i := range evs {
			evs[i] = groupMsg("a/bot"+strconv.Itoa(i), "m"+strconv.Itoa(i), "20001", at(mentioned), text(" hello"))
		}
		for _, impl := range []string{"pick", "none"} {
			b.Run(fmt.Sprint("bots=", n, "/handler=", impl), func(b *testing.B) {
				cur := time.Unix(1_700_000_000, 0)
				c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{Now: func() time.Time { return cur }})
				d := multibot.NewDispatcher(c, nil)
				for i := range n {
					d.Bots().Register("a", "bot"+strconv.Itoa(i))
				}
				var picked dedupe.Participant
				var bots int
				d.Handle("!message", multibot.EventHandlerFunc(func(_ context.Context, ev *dedupe.Event, obs dedupe.Observation) error {
					if impl == "pick" {
						picked = d.PickReplyBot(ev, obs)
						bots = len(d.BotsForEvent(obs))
					}
					return nil
				}))
				ctx := context.Background()
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if i == n {
						i = 0
						cur = cur.Add((15 * time.Second) + time.Second)
					}
					if err := d.Dispatch(ctx, evs[i]); err != nil {
						b.Fatal(err)
					}
					if impl == "pick" && (picked.BotID != mentioned || bots != i+1) {
						b.Fatalf("delivery %d: picked %+v, %d bots", i, picked, bots)
					}
					i++
				}
			})
		}
	}
}
