//go:build unix

package dedupe_test

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// benchCorpus observes the deliveries in order, each at its time, looping over
// them with the clock moved on by the corpus span plus the longest window at
// each pass, so every pass starts with the previous pass's groups ended.
func benchCorpus(b *testing.B, evs []corpusEvent, maxGroups int, newObserver func(now func() time.Time, maxGroups int) func(*dedupe.Event)) {
	cur := evs[0].at // the clock reads the first delivery's time when the correlator is made
	observe := newObserver(func() time.Time { return cur }, maxGroups)
	span := evs[len(evs)-1].at.Sub(evs[0].at) + (60 * time.Second) + time.Second
	var shift time.Duration
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	for i, j := 0, 0; i < b.N; i, j = i+1, j+1 {
		if j == len(evs) {
			j = 0
			shift += span
		}
		d := &evs[j]
		cur = d.at.Add(shift)
		observe(d.ev)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU returns the CPU time the process has used. On a shared machine
// the wall time of a benchmark includes time spent waiting for a core; with
// -cpu 1, cpu-ns/op is the work of one Observe, garbage collection included,
// whatever the load.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func correlatorObserver(now func() time.Time, maxGroups int) func(*dedupe.Event) {
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{Now: now, MaxGroups: maxGroups})
	return func(ev *dedupe.Event) { c.Observe(ev) }
}

func naiveObserver(now func() time.Time, maxGroups int) func(*dedupe.Event) {
	c := newNaiveCorrelator(now, maxGroups)
	return func(ev *dedupe.Event) { c.Observe(ev) }
}

// benchWorkload is a sequence of deliveries and the cap to observe them with.
type benchWorkload struct {
	name      string
	maxGroups int
	load      func(testing.TB) []corpusEvent
}

func benchWorkloads() []benchWorkload {
	first5k := func(testing.TB) []corpusEvent {
		return slices.Clone(genSaturated(60000, 1000, 5)[:5000]) // the rest is garbage, not live heap
	}
	w := []benchWorkload{
		{"corpus", 4096, loadCorpus},
		{"saturated", 4096, func(testing.TB) []corpusEvent { return genSaturated(60000, 1000, 5) }},
		{"saturated-5k", 1024, first5k},
		{"unsaturated-5k", 1 << 20, first5k},
	}
	if path := os.Getenv("DEDUPE_SATURATED_CORPUS"); path != "" {
		w = append(w, benchWorkload{"saturated-file", 4096, func(tb testing.TB) []corpusEvent { return loadCorpusFile(tb, path) }})
	}
	return w
}

// BenchmarkObserve measures Observe against the naive baseline, one
// delivery at a time, on:
//
//   - corpus: the shared corpus (5,000 deliveries at 100 logical events/s,
//     about 1,500 live groups, under the cap of 4,096);
//   - saturated: a workload to the recipe of ../shared/tools/gen-correlator-corpus
//     60000 1000 5 (1,000 logical events/s, about 15,000 live keys for 4,096
//     groups, so nearly every new group evicts one), generated in Go by
//     genSaturated because the tool's output is too large to commit; set
//     DEDUPE_SATURATED_CORPUS to a file the tool wrote (optionally gzipped) to
//     run on that as well;
//   - saturated-5k: its first 5,000 deliveries with a cap of 1,024 (about 2,800
//     live keys), equally saturated but with the corpus's memory footprint.
//     Reading 60,000 pre-decoded events misses the CPU caches, which slows
//     the key computation itself (see BenchmarkCorrelationKey); this variant
//     and the next show the cost of saturation alone;
//   - unsaturated-5k: the same deliveries with a cap they never reach.
//
// Events are decoded before the timer starts.
func BenchmarkObserve(b *testing.B) {
	for _, w := range benchWorkloads() {
		b.Run(w.name, func(b *testing.B) {
			evs := w.load(b)
			b.Run("impl=correlator", func(b *testing.B) { benchCorpus(b, evs, w.maxGroups, correlatorObserver) })
			b.Run("impl=naive", func(b *testing.B) { benchCorpus(b, evs, w.maxGroups, naiveObserver) })
		})
	}
}

// BenchmarkCorrelationKey measures the key computation alone over each
// workload: the part of Observe that does not depend on the correlator's
// state.
func BenchmarkCorrelationKey(b *testing.B) {
	for _, w := range benchWorkloads() {
		b.Run(w.name, func(b *testing.B) {
			evs := w.load(b)
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			for i, j := 0, 0; i < b.N; i, j = i+1, j+1 {
				if j == len(evs) {
					j = 0
				}
				evs[j].ev.CorrelationKey()
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkObserveDuplicate measures the duplicate path alone: a second bot's
// copy of a text message whose group exists.
func BenchmarkObserveDuplicate(b *testing.B) {
	var cur time.Time = time.Unix(1_700_000_000, 0)
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{Now: func() time.Time { return cur }})
	first := textEvent("onebotv11", "111", "m1", "hello world, this is a message")
	c.Observe(first)
	dup := textEvent("icqq", "222", "m2", "hello world, this is a message")
	b.ReportAllocs()
	for b.Loop() {
		if !c.Observe(dup).Duplicate {
			b.Fatal("not a duplicate")
		}
	}
}

// BenchmarkObserveManyBots measures one delivery of a message that n
// distinct bots deliver, each a copy joining the group of the first, with a
// look-up of another bot's delivery in the group (as a reply bot is chosen).
// The cost per delivery must not grow with n; every n deliveries the clock
// moves past the window, so a new group starts. cpu-ns/op is the process CPU
// time a delivery, garbage collection included (see processCPU). The naive baseline appends
// without looking for the bot, so it shows the floor.
func BenchmarkObserveManyBots(b *testing.B) {
	for _, n := range []int{1, 10, 1000, 30000} {
		evs := make([]*dedupe.Event, n)
		for i := range evs {
			evs[i] = textEvent("a", strconv.Itoa(i), "m"+strconv.Itoa(i), "one message, many bots")
		}
		b.Run(fmt.Sprint("bots=", n, "/impl=correlator"), func(b *testing.B) {
			cur := time.Unix(1_700_000_000, 0)
			c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{Now: func() time.Time { return cur }})
			b.ReportAllocs()
			cpu0 := processCPU()
			i := 0
			for b.Loop() {
				if i == n {
					i = 0
					cur = cur.Add((15 * time.Second) + time.Second)
				}
				obs := c.Observe(evs[i])
				if _, ok := c.Participant(obs, "a", evs[i/2].Identity.BotID); !ok || obs.Duplicate != (i > 0) {
					b.Fatalf("delivery %d: %+v", i, obs)
				}
				i++
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
		b.Run(fmt.Sprint("bots=", n, "/impl=naive"), func(b *testing.B) {
			cur := time.Unix(1_700_000_000, 0)
			c := newNaiveCorrelator(func() time.Time { return cur }, 4096)
			b.ReportAllocs()
			cpu0 := processCPU()
			i := 0
			for b.Loop() {
				if i == n {
					i = 0
					cur = cur.Add((15 * time.Second) + time.Second)
				}
				c.Observe(evs[i])
				i++
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkObserveParallel measures contention: every goroutine observes its
// own copy of the shared corpus with the real clock.
func BenchmarkObserveParallel(b *testing.B) {
	evs := loadCorpus(b)
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{})
	copies := make([][]dedupe.Event, runtime.GOMAXPROCS(0)) // RunParallel's goroutines
	for g := range copies {
		copies[g] = make([]dedupe.Event, len(evs))
		for i := range evs {
			copies[g][i] = *evs[i].ev
		}
	}
	var next atomic.Int32
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mine := copies[int(next.Add(1)-1)%len(copies)]
		for i := 0; pb.Next(); i++ {
			ev := &mine[i%len(mine)]
			c.Observe(ev)
		}
	})
}

// BenchmarkSignature measures the content signature of each segment shape.
func BenchmarkSignature(b *testing.B) {
	cases := map[string][]dedupe.Segment{
		"text":      {{Type: "text", Data: map[string]any{"text": "help the what 收到 now test 😀 bot"}}},
		"at+text":   {{Type: "at", Data: map[string]any{"qq": json.Number("111")}}, {Type: "text", Data: map[string]any{"text": " hello"}}},
		"image-md5": {{Type: "image", Data: map[string]any{"file": "DBB3746F0128C88F07CEB6F23812F987.jpg", "url": "https://multimedia.nt.qq.com.cn/download?fileid=dbb3746f0128&rkey=0.69"}}},
		"image-url": {{Type: "image", Data: map[string]any{"file": "image", "url": "https://Multimedia.NT.qq.com.cn:443/download?rkey=0.65&fileid=dbb3746f0128&appid=1407"}}},
		"json-text": {{Type: "json", Data: map[string]any{"data": `{"app": "com.tencent.miniapp", "meta": {"id": 1234, "title": "hello world"}, "ver": "1.0"}`}}},
		"json-obj":  {{Type: "json", Data: map[string]any{"data": map[string]any{"ver": "1.0", "app": "com.tencent.miniapp", "meta": map[string]any{"title": "hello world", "id": json.Number("1234")}}}}},
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range cases {
			if !yield(k) {
				return
			}
		}
	}) {
		segs := cases[name]
		b.Run(name, func(b *testing.B) {
			ev := &dedupe.Event{Kind: "message", MessageType: "group", GroupID: "1", UserID: "2", Segments: segs}
			b.ReportAllocs()
			for b.Loop() {
				ev.CorrelationKey()
			}
		})
	}
}

func textEvent(adapter, bot, msgID, text string) *dedupe.Event {
	return &dedupe.Event{
		Kind:        "message",
		Identity:    dedupe.Identity{Adapter: adapter, BotID: bot, MessageID: msgID},
		MessageType: "group", GroupID: "100", UserID: "20001",
		Segments: []dedupe.Segment{{Type: "text", Data: map[string]any{"text": text}}},
	}
}

// genSaturated generates n deliveries of multi-bot traffic at rate logical
// events a second, deterministically from seed, following the recipe of
// ../shared/tools/gen-correlator-corpus (the same bots, content mix, adapter
// renderings and 300 ms skew; not the same random stream). Contents are drawn
// from a large space, so almost every logical event has a key of its own.
func genSaturated(n int, rate float64, seed uint64) []corpusEvent {
	rnd := rand.New(rand.NewPCG(seed, 0x636f7272656c6174))
	bots := []struct{ Adapter, ID string }{{"onebotv11", "111"}, {"icqq", "222"}, {"onebotv11", "333"}}
	words := strings.Split("hello world ok lol 哈哈 好的 收到 test ping bot help 早上好 晚安 in the game now who what why 😀 🎉 ｆｕｌｌ　width tabs\tand  spaces", " ")
	text := func() string {
		k := 1 + rnd.IntN(14)
		parts := make([]string, k)
		for i := range parts {
			parts[i] = words[rnd.IntN(len(words))]
		}
		return strings.Join(parts, " ")
	}
	type item struct {
		kind string // text, at, face, image, card, video
		v    string
		card map[string]any
	}
	content := func() []item {
		p := rnd.Float64()
		switch {
		case p < 0.55:
			return []item{{kind: "text", v: text()}}
		case p < 0.70:
			sum := md5.Sum(fmt.Appendf(nil, "%v", rnd.Float64()))
			return []item{{kind: "text", v: text()}, {kind: "image", v: hex.EncodeToString(sum[:])}}
		case p < 0.78:
			return []item{{kind: "at", v: bots[rnd.IntN(3)].ID}, {kind: "text", v: " " + text()}}
		case p < 0.85:
			return []item{{kind: "card", card: map[string]any{"app": "com.tencent.miniapp", "meta": map[string]any{"id": json.Number(fmt.Sprint(rnd.IntN(1_000_000))), "title": text()}, "ver": "1.0"}}}
		case p < 0.92:
			return []item{{kind: "face", v: fmt.Sprint(rnd.IntN(300))}, {kind: "text", v: text()}}
		case p < 0.96:
			return []item{{kind: "text", v: strings.Repeat("x", 200+rnd.IntN(201)) + text()}}
		}
		return []item{{kind: "video"}, {kind: "text", v: text()}}
	}
	render := func(c []item, adapter string) []dedupe.Segment {
		var segs []dedupe.Segment
		if rnd.Float64() < 0.2 {
			segs = append(segs, dedupe.Segment{Type: "reply", Data: map[string]any{"id": fmt.Sprint(rnd.IntN(1_000_000))}})
		}
		for _, it := range c {
			switch it.kind {
			case "text":
				segs = append(segs, dedupe.Segment{Type: "text", Data: map[string]any{"text": it.v}})
			case "at":
				var qq any = it.v
				if rnd.Float64() < 0.5 {
					qq = json.Number(it.v)
				}
				segs = append(segs, dedupe.Segment{Type: "at", Data: map[string]any{"qq": qq}})
			case "face":
				var id any = it.v
				if rnd.Float64() < 0.5 {
					id = json.Number(it.v)
				}
				segs = append(segs, dedupe.Segment{Type: "face", Data: map[string]any{"id": id}})
			case "image":
				md5, fileid, r := it.v, it.v[:12], rnd.Float64()
				var data map[string]any
				switch {
				case adapter == "icqq":
					d := md5
					if r >= 0.5 {
						d = strings.ToUpper(md5)
					}
					data = map[string]any{"md5": d, "url": "https://gchat.qpic.cn/gchatpic_new/0/0-0-" + strings.ToUpper(md5) + "/0"}
				case r < 0.85:
					data = map[string]any{"file": strings.ToUpper(md5) + ".jpg", "url": fmt.Sprintf("https://multimedia.nt.qq.com.cn/download?fileid=%s&rkey=%v", fileid, rnd.Float64())}
				default:
					data = map[string]any{"file": "image", "url": fmt.Sprintf("https://Multimedia.NT.qq.com.cn:443/download?rkey=%v&fileid=%s&appid=1407", rnd.Float64(), fileid)}
				}
				segs = append(segs, dedupe.Segment{Type: "image", Data: data})
			case "card":
				var data any = it.card
				if rnd.Float64() >= 0.5 {
					b, _ := json.Marshal(it.card)
					switch rnd.IntN(3) {
					case 1:
						b, _ = json.MarshalIndent(it.card, "", "  ")
					case 2:
						s := strings.ReplaceAll(string(b), ",", ", ")
						b = []byte(strings.ReplaceAll(s, ":", ": "))
					}
					data = string(b)
				}
				segs = append(segs, dedupe.Segment{Type: "json", Data: map[string]any{"data": data}})
			case "video":
				segs = append(segs, dedupe.Segment{Type: "video", Data: map[string]any{"file": fmt.Sprintf("https://v.example/%v.mp4", rnd.Float64())}})
			}
		}
		return segs
	}

	var out []corpusEvent
	t := float64(1_700_000_000_000)
	mid, logical := 0, 0
	for len(out) < n {
		t += rnd.ExpFloat64() / rate * 1000
		g := fmt.Sprint(rnd.IntN(300))
		u := fmt.Sprint(10000 + rnd.IntN(20000))
		k := 1 + rnd.IntN(5)/2 // 1, 2 or 3 copies, 40/40/20
		perm := rnd.Perm(3)[:k]
		logical++
		r := rnd.Float64()
		var c []item
		mt := "group"
		if r < 0.95 {
			c = content()
			if rnd.Float64() < 0.1 {
				mt = "private"
			}
		}
		op := fmt.Sprint(rnd.IntN(100))
		comment := text()
		for j, bi := range perm {
			bot := bots[bi]
			mid++
			at := t
			if j > 0 {
				at += rnd.Float64() * 300
			}
			ev := &dedupe.Event{Identity: dedupe.Identity{Adapter: bot.Adapter, BotID: bot.ID, Timestamp: time.UnixMilli(int64(t))}}
			switch {
			case r < 0.95:
				ev.Kind, ev.MessageType, ev.UserID = "message", mt, u
				if mt == "group" {
					ev.GroupID = g
				}
				ev.Identity.EventType = "message." + mt
				ev.Identity.MessageID = fmt.Sprintf("%s-%s-%d", bot.Adapter, bot.ID, mid)
				ev.Segments = render(c, bot.Adapter)
			case r < 0.99:
				ev.Kind, ev.NoticeType, ev.SubType = "notice", "group_increase", "approve"
				ev.GroupID, ev.UserID, ev.OperatorID = g, u, op
				ev.Identity.EventType = "notice.group_increase"
			default:
				ev.Kind, ev.RequestType, ev.UserID, ev.Comment = "request", "friend", u, comment
				ev.Identity.EventType = "request.friend"
				ev.Identity.NativeEventID = fmt.Sprintf("flag%d", len(out))
			}
			out = append(out, corpusEvent{at: time.UnixMilli(int64(at)), logical: logical, ev: ev})
		}
	}
	out = out[:n]
	slices.SortStableFunc(out, func(a, b corpusEvent) int { return a.at.Compare(b.at) })
	return out
}

// BenchmarkObserveRepeat measures one sender sending messages 1 ms apart,
// each delivered by one bot or three, with a text of its own (distinct) or one
// text again and again (repeated), observed at their send times; the key of
// the repeated text has as many live groups as the cap allows.
func BenchmarkObserveRepeat(b *testing.B) {
	for _, bots := range []int{1, 3} {
		for _, repeated := range []bool{false, true} {
			name := fmt.Sprint("bots=", bots, "/text=distinct")
			if repeated {
				name = fmt.Sprint("bots=", bots, "/text=repeated")
			}
			evs := repeatTraffic(20000, bots, repeated)
			b.Run(name, func(b *testing.B) { benchCorpus(b, evs, 4096, correlatorObserver) })
		}
	}
}
