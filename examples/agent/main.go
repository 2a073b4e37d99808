// Agent is an AI agent's HTTP API behind package idempotency: a client's
// POST /v1/messages carries an Idempotency-Key, the agent calls its model
// once per key, and every retry of that request gets the same reply, from a
// retry after a timeout, from a retry sent while the first is still being
// answered, and from a retry after the gateway restarted.
//
// It starts the agent's gateway on a loopback port, with a fake model that
// counts its calls and takes -llm-delay to answer, and plays a client:
//
//  1. a message, and the client's retry of it: the same reply, replayed
//     (Idempotent-Replayed: true), one model call;
//  2. a message and a retry sent while the first is waiting on the model: the
//     retry waits for it (idempotency.WithWait) and gets the same reply;
//  3. the same key with another message: 422, no model call;
//  4. a restart: the gateway stops, its store is closed and opened again, a
//     new gateway starts, and the retry of the first message gets the same
//     reply without a model call (a durable store; skipped with memory).
//
// It prints each step and exits with status 1 if a reply differs or the
// model was called more than once per key, 2 on a setup error.
//
// With -platform, it is a chat gateway instead, replying to each message it
// is delivered through package reply, to a fake platform API
// (reply/replytest) that honours the platform's idempotency token as the
// platform documents it. Each message goes through Deduper.Do, the model is
// called once (the reply's record keeps its answer) and the reply goes out
// through a reply.Sender. The platform
//
//  1. accepts the reply's send and never answers it (the send times out);
//  2. accepts it and answers 500;
//  3. restarts while the send waits for its answer;
//  4. refuses it with 503 before accepting it;
//  5. and the gateway dies between the send and the message's mark.
//
// After each, the platform delivers the message again until the gateway
// takes it, then once more (a copy, which sends nothing), and the demo
// counts the platform's messages of the reply. On LINE, Discord and Feishu
// (-policy native, their default) each reply is on the platform once.
// Telegram has no token: at-most-once (its default) reports the reply of an
// unknown outcome possibly lost and never sends it twice; at-least-once
// sends it again and reports it possibly duplicated. The demo exits with
// status 1 on a reply duplicated or lost without a report.
//
// Usage:
//
//	go run ./examples/agent [-store STORE] [-llm-delay D]
//	go run ./examples/agent -platform line|discord|feishu|telegram [-policy at-most-once|at-least-once] [-store STORE]
//
// -store is the store of keys and replies: a SQLite file in a temporary
// directory by default, sqlite:PATH or PATH.db, memory, redis://HOST:PORT/DB
// or a postgres://… URL. The idempotency keys start with a number taken from the
// clock, so that runs on one durable store do not see each other's keys; on
// a server the program keeps to its own keys (Redis prefix
// "dedupe:examples-agent:", PostgreSQL table "examples_agent_dedupe").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	os.Exit(mainArgs(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags set.
type config struct {
	Store    string
	LLMDelay time.Duration
	Platform string // the replies demo's platform ("": the idempotency demo)
	Policy   string // its policy ("": the platform's)
}

func mainArgs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.Store, "store", "", "store: sqlite:PATH, PATH.db, memory, redis://… or postgres://… (default: a SQLite file in a temporary directory)")
	fs.DurationVar(&cfg.LLMDelay, "llm-delay", 200*time.Millisecond, "how long the fake model takes to answer")
	fs.StringVar(&cfg.Platform, "platform", "", "run the replies demo on this platform's semantics: line, discord, feishu or telegram")
	fs.StringVar(&cfg.Policy, "policy", "", "the replies demo's policy after an unknown outcome: native, at-most-once or at-least-once (default: the platform's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if cfg.Store == "" {
		dir, err := os.MkdirTemp("", "agent-example-")
		if err != nil {
			fmt.Fprintln(stderr, "agent:", err)
			return 2
		}
		defer os.RemoveAll(dir)
		cfg.Store = "sqlite:" + dir + "/agent.db"
	}
	run, done := run, "ok: every retry got the first reply; the model was called once per key"
	if cfg.Platform != "" {
		run, done = runReplies, "ok: every reply is on the platform once, or its possible loss or duplicate reported; the model was called once per message"
	}
	err := run(ctx, cfg, stdout)
	var failed *failure
	switch {
	case errors.As(err, &failed):
		fmt.Fprintln(stdout, "FAIL:", err)
		return 1
	case err != nil:
		fmt.Fprintln(stderr, "agent:", err)
		return 2
	}
	fmt.Fprintln(stdout, done)
	return 0
}

// failure is a check of the demo that did not hold, as opposed to a setup
// error.
type failure struct{ msg string }

func (f *failure) Error() string { return f.msg }

func failf(format string, args ...any) error { return &failure{fmt.Sprintf(format, args...)} }
