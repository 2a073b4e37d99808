package dedupe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
)

// A gateway runs each webhook delivery through Deduper.Do: the message is
// processed once however often the platform sends it.
func Example() {
	d := dedupe.New(nil) // in memory; a SQLite, Redis or PostgreSQL store remembers across restarts
	defer d.Close()

	handle := func(ctx context.Context, updateID int64, text string) error {
		key := dedupe.Key{Channel: "telegram", MessageID: strconv.FormatInt(updateID, 10)}
		err := d.Do(ctx, key, func(ctx context.Context) error {
			fmt.Println("answering:", text) // dispatch to the AI core, deliver the answer
			return nil
		})
		if errors.Is(err, dedupe.ErrDuplicate) || errors.Is(err, dedupe.ErrInFlight) {
			return nil // acknowledge: processed already, or being processed now
		}
		return err // nil, or a failure: released, so the platform's retry is processed
	}

	ctx := context.Background()
	_ = handle(ctx, 1001, "hello")
	_ = handle(ctx, 1001, "hello") // the platform's retry after a timeout
	fmt.Println("processed:", d.Stats().Processed, "duplicates:", d.Stats().Duplicates)
	// Output:
	// answering: hello
	// processed: 1 duplicates: 1
}

func ExampleParseKey() {
	k, err := dedupe.ParseKey("web:a:b")
	fmt.Printf("%q %q %v\n", k.Channel, k.MessageID, err)
	// Output: "web" "a:b" <nil>
}

func ExampleExtractKey() {
	// Decode with UseNumber so that large ids (Discord snowflakes) stay exact.
	body := `{"metadata": {"discord_message_id": 1187654321098765432}, "text": "hi"}`
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var parsed map[string]any
	if err := dec.Decode(&parsed); err != nil {
		panic(err)
	}
	k, err := dedupe.ExtractKey("discord", parsed)
	fmt.Println(k, err)

	_, err = dedupe.ExtractKey("discord", map[string]any{"text": "no id"})
	fmt.Println(errors.Is(err, dedupe.ErrNoMessageID))
	// Output:
	// discord:1187654321098765432 <nil>
	// true
}

func ExampleMemoryStore() {
	ctx := context.Background()
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: time.Hour, MaxSize: 100000})
	defer st.Close()
	k := dedupe.Key{Channel: "telegram", MessageID: "123"}

	first := dedupe.NewClaim(k)          // a new token for this copy
	status, _ := st.Claim(ctx, first, 0) // 0: the default lease
	fmt.Println("first copy:", status)
	status, _ = st.Claim(ctx, dedupe.NewClaim(k), 0)
	fmt.Println("second copy:", status)

	_ = st.Mark(ctx, k, 0) // processed; 0: the default TTL (1 h here)
	seen, _ := st.Exists(ctx, k)
	status, _ = st.Claim(ctx, dedupe.NewClaim(k), 0)
	fmt.Println("exists:", seen, "retry:", status)
	// Output:
	// first copy: claimed
	// second copy: in_flight
	// exists: true retry: duplicate
}

func ExampleDeduper_Do() {
	d := dedupe.New(nil) // a default memory store
	ctx := context.Background()
	k := dedupe.Key{Channel: "slack", MessageID: "Ev08MFMKH6"}

	deliver := func(attempt string, fail bool) {
		err := d.Do(ctx, k, func(ctx context.Context) error {
			if fail {
				return errors.New("AI core unavailable")
			}
			fmt.Println(attempt, "-> answered")
			return nil
		})
		switch {
		case errors.Is(err, dedupe.ErrDuplicate), errors.Is(err, dedupe.ErrInFlight):
			fmt.Println(attempt, "-> acknowledged, not processed again")
		case err != nil:
			fmt.Println(attempt, "-> failed, the platform will retry:", err)
		}
	}
	deliver("delivery", true)
	deliver("retry 1", false)
	deliver("retry 2", false)

	s := d.Stats()
	fmt.Println("processed", s.Processed, "duplicates", s.Duplicates, "failed", s.Failed)
	// Output:
	// delivery -> failed, the platform will retry: AI core unavailable
	// retry 1 -> answered
	// retry 2 -> acknowledged, not processed again
	// processed 1 duplicates 1 failed 1
}

// DoResult keeps the first run's reply with the mark, so a redelivery gets
// the same reply without a second LLM call.
func ExampleDeduper_DoResult() {
	d := dedupe.New(nil) // every store of this module keeps results
	defer d.Close()
	ctx := context.Background()
	k := dedupe.Key{Channel: "discord", MessageID: "1207413557290094662"}

	answer := func(ctx context.Context) ([]byte, error) {
		fmt.Println("calling the LLM")
		return []byte("Paris."), nil
	}
	for _, attempt := range []string{"delivery", "redelivery"} {
		reply, err := d.DoResult(ctx, k, answer)
		if err != nil && !errors.Is(err, dedupe.ErrDuplicate) {
			fmt.Println(attempt, "failed:", err)
			continue
		}
		fmt.Printf("%s -> %s (duplicate: %v)\n", attempt, reply, errors.Is(err, dedupe.ErrDuplicate))
	}
	// Output:
	// calling the LLM
	// delivery -> Paris. (duplicate: false)
	// redelivery -> Paris. (duplicate: true)
}

// A LINE webhook carries several events; the platform redelivers the whole
// batch if the gateway did not answer 200. DoEach runs each event once: on
// the redelivery only the event that failed runs again.
func ExampleDeduper_DoEach() {
	d := dedupe.New(nil)
	ctx := context.Background()
	events := []dedupe.Key{
		{Channel: "line", MessageID: "01FZ74A0TDDPYRVKNK77XKC3ZR"},
		{Channel: "line", MessageID: "01FZ74ASS536FW97EX38NKCZQK"},
		{Channel: "line", MessageID: "01FZ74B5Y0F4TNKA5SCAVKPEDM"},
	}
	modelDown := true
	deliver := func(attempt string) {
		errs := d.DoEach(ctx, events, func(ctx context.Context, i int) error {
			if i == 1 && modelDown {
				return errors.New("AI core unavailable")
			}
			fmt.Println(attempt, "event", i, "-> answered")
			return nil
		})
		for i, err := range errs {
			switch {
			case errors.Is(err, dedupe.ErrDuplicate), errors.Is(err, dedupe.ErrInFlight):
			case err != nil:
				fmt.Println(attempt, "event", i, "-> failed, the platform will redeliver:", err)
			}
		}
	}
	deliver("delivery")
	modelDown = false
	deliver("redelivery")
	// Output:
	// delivery event 0 -> answered
	// delivery event 2 -> answered
	// delivery event 1 -> failed, the platform will redeliver: AI core unavailable
	// redelivery event 1 -> answered
}

// An operator reprocesses a message after a bug fix: Forget drops its mark,
// unless a copy of it is being processed right now.
func ExampleForgetter() {
	ctx := context.Background()
	var st dedupe.Store = dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	defer st.Close()
	k := dedupe.Key{Channel: "telegram", MessageID: "42"}
	_ = st.Mark(ctx, k, time.Hour)

	f, ok := st.(dedupe.Forgetter)
	if !ok {
		fmt.Println("this store cannot forget")
		return
	}
	forgotten, err := f.Forget(ctx, k)
	fmt.Println(forgotten, err)
	status, _ := st.Claim(ctx, dedupe.NewClaim(k), 0)
	fmt.Println(status) // processed again

	_, err = f.Forget(ctx, k)
	fmt.Println(errors.Is(err, dedupe.ErrInFlight))
	// Output:
	// true <nil>
	// claimed
	// true
}
