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
// Usage:
//
//	go run ./examples/agent [-store STORE] [-llm-delay D]
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
}

func mainArgs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.Store, "store", "", "store: sqlite:PATH, PATH.db, memory, redis://… or postgres://… (default: a SQLite file in a temporary directory)")
	fs.DurationVar(&cfg.LLMDelay, "llm-delay", 200*time.Millisecond, "how long the fake model takes to answer")
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
	fmt.Fprintln(stdout, "ok: every retry got the first reply; the model was called once per key")
	return 0
}

// failure is a check of the demo that did not hold, as opposed to a setup
// error.
type failure struct{ msg string }

func (f *failure) Error() string { return f.msg }

func failf(format string, args ...any) error { return &failure{fmt.Sprintf(format, args...)} }
