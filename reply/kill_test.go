package reply_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest/killtest"
	"github.com/gatewaykit/dedupe/reply"
)

// Environment of the children of TestSendKill.
const (
	killPolicy   = "DEDUPE_REPLYKILL_POLICY" // a Policy's String
	killStore    = "DEDUPE_REPLYKILL_STORE"  // the SQLite file
	killPlatform = "DEDUPE_REPLYKILL_PLATFORM"
	killFinish   = "DEDUPE_REPLYKILL_FINISH" // the finishing child's report
)

// The messages and replies of the kill test, and the lease of a reply's
// lock: short, so that the lock of a killed child runs out soon.
const (
	killRounds   = 8
	killMessages = 20 // per round
	killSlots    = 2
	killLease    = 300 * time.Millisecond
)

// killKeyOf is the key of message i of round r.
func killKeyOf(r, i int) dedupe.Key {
	return dedupe.Key{Channel: "kill", MessageID: fmt.Sprintf("%d-%d", r, i)}
}

// Rounds of two processes sending the replies of 20 messages (new ones in
// each round) through one SQLite file, each SIGKILLed at a random instant
// (between a send and its record, among others), then a last process that
// sends every reply not settled. The platform is a file that records each message a user would
// see with its token. After the restart the policy holds:
//   - native (LINE's retry key: the platform drops a repeat of a token):
//     every reply reached the user, and every copy the platform got carries
//     the reply's own token, so the user saw it once: 0 lost, 0 duplicates;
//   - at most once: no reply reached the user twice, and each that never
//     reached it is reported (ErrMaybeLost) by the last process;
//   - at least once: every reply reached the user; the copies are counted.
func TestSendKill(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	for _, pol := range []reply.Policy{reply.Native, reply.AtMostOnce, reply.AtLeastOnce} {
		t.Run(pol.String(), func(t *testing.T) {
			dir := t.TempDir()
			env := []string{killPolicy + "=" + pol.String(), killStore + "=" + filepath.Join(dir, "replies.db"),
				killPlatform + "=" + filepath.Join(dir, "platform.log"), killFinish + "=" + filepath.Join(dir, "finish.log")}
			cfg := killtest.Config{Test: "TestSendKillChild", Env: env, Rounds: killRounds, MaxDelay: 250 * time.Millisecond}
			killtest.Run(t, cfg)
			killtest.Finish(t, cfg)
			checkKill(t, pol, readLines(t, filepath.Join(dir, "platform.log")), readLines(t, filepath.Join(dir, "finish.log")))
		})
	}
}

// checkKill checks the platform's record and the last process's report
// against the policy.
func checkKill(t *testing.T, pol reply.Policy, platform, finish []string) {
	seen := map[string]int{}
	for _, line := range platform {
		f := strings.Fields(line) // key slot token
		require.Len(t, f, 3, "platform line %q", line)
		k, slot := killKey(t, f[0]), f[1]
		n, err := strconv.Atoi(slot)
		require.NoError(t, err)
		require.Equal(t, reply.UUID(k, n), f[2], "the token of %s slot %d", k, n)
		seen[f[0]+"#"+slot]++
	}
	reported := map[string]bool{}
	for _, line := range finish {
		f := strings.Fields(line) // key slot outcome
		require.Len(t, f, 3, "finish line %q", line)
		if f[2] == "maybe-lost" {
			reported[f[0]+"#"+f[1]] = true
		}
	}
	var lost, dups, copies int
	for i := range killRounds * killMessages {
		for slot := range killSlots {
			r := fmt.Sprintf("%s#%d", killKeyOf(i/killMessages, i%killMessages), slot)
			switch n := seen[r]; {
			case n == 0:
				lost++
				assert.True(t, reported[r], "reply %s lost without a report", r)
			case n > 1:
				dups++
				copies += n - 1
			}
		}
	}
	t.Logf("%v: %d replies, %d platform requests, %d never received, %d received more than once (%d copies%s), %d reported possibly lost",
		pol, killRounds*killMessages*killSlots, len(platform), lost, dups, copies,
		map[bool]string{true: ", each with its reply's token: dropped by the platform"}[pol == reply.Native], len(reported))
	switch pol {
	case reply.Native: // the platform drops the copies: each carries its reply's token
		assert.Zero(t, lost, "lost replies")
		assert.Empty(t, reported, "replies reported lost")
	case reply.AtMostOnce:
		assert.Zero(t, dups, "duplicated replies")
	case reply.AtLeastOnce:
		assert.Zero(t, lost, "lost replies")
	}
}

func killKey(t *testing.T, s string) dedupe.Key {
	k, err := dedupe.ParseKey(s)
	require.NoError(t, err)
	return k
}

func readLines(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.NoError(t, sc.Err())
	return lines
}

// appendLine appends one line to path in one write, whole with O_APPEND.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	return errors.Join(err, f.Close())
}

// TestSendKillChild is a child of TestSendKill: it sends every reply, again
// and again, until killed; as the finishing child, until every reply is
// settled, and reports those the policy will not send again.
func TestSendKillChild(t *testing.T) {
	polName := os.Getenv(killPolicy)
	if polName == "" {
		t.Skip("a child process of TestSendKill")
	}
	pol := map[string]reply.Policy{"native": reply.Native, "at-most-once": reply.AtMostOnce, "at-least-once": reply.AtLeastOnce}[polName]
	st, err := dedupe.OpenSQLite(os.Getenv(killStore), dedupe.SQLiteConfig{BusyTimeout: 30 * time.Second})
	require.NoError(t, err)
	defer st.Close()
	pf := reply.Platform{Name: "kill", Policy: pol, Window: 24 * time.Hour, Token: reply.UUID}
	s := reply.New(st, pf, reply.WithLease(killLease))
	platform := os.Getenv(killPlatform)
	send := func(ctx context.Context, m reply.Message) (string, error) {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if err := appendLine(platform, fmt.Sprintf("%s %d %s", m.Key, m.Slot, m.Token)); err != nil {
			return "", reply.NotSent(err)
		}
		time.Sleep(5 * time.Millisecond) // the platform's answer on its way: a kill may fall here
		return fmt.Sprintf("%s#%d", m.Key, m.Slot), nil
	}
	round := os.Getenv("KILLTEST_ROUND")
	finish := round == "finish"
	rounds := []int{0}
	if finish {
		rounds = make([]int, killRounds)
		for r := range rounds {
			rounds[r] = r
		}
	} else {
		r, err := strconv.Atoi(round)
		require.NoError(t, err)
		rounds[0] = r
	}
	killtest.Ready()
	for {
		for _, r := range rounds {
			for i := range killMessages {
				for slot := range killSlots {
					killSend(t, s, killKeyOf(r, i), slot, send, finish)
				}
			}
		}
		if finish {
			return
		}
	}
}

// killSend sends one reply of the kill test; the finishing child retries
// until the reply is settled, and reports it.
func killSend(t *testing.T, s *reply.Sender, k dedupe.Key, slot int, send reply.SendFunc, finish bool) {
	compose := func(context.Context) ([]byte, error) { return []byte(fmt.Sprintf("answer to %s #%d", k, slot)), nil }
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := s.Send(context.Background(), k, slot, compose, send)
		switch {
		case !finish:
			return
		case errors.Is(err, dedupe.ErrInFlight) && time.Now().Before(deadline):
			time.Sleep(killLease / 10) // a killed child's lock runs out with its lease
			continue
		case errors.Is(err, reply.ErrMaybeLost):
			require.NoError(t, appendLine(os.Getenv(killFinish), fmt.Sprintf("%s %d maybe-lost", k, slot)))
		case err != nil:
			t.Fatalf("Send of %s slot %d: %v", k, slot, err)
		default:
			require.NoError(t, appendLine(os.Getenv(killFinish), fmt.Sprintf("%s %d sent", k, slot)))
		}
		return
	}
}
