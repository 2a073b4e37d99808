// Command dedupe copies the marks of one dedupe store to another, reports
// what a store holds and forgets marks.
//
//	dedupe migrate --from URL --to URL [--dry-run] [--batch N] [--checkpoint FILE] [--restart] [--no-expiry-ttl D]
//	dedupe stats URL
//	dedupe forget [-store URL] KEY...
//
// A store URL is one of the forms docs/urls.md describes, the grammar the
// library's deduperedis.OpenURL and postgres.Open take as well:
//
//	sqlite:PATH[?table=T&tz=ZONE]   a SQLite file; NekoBot's gateway.db by default
//	memory:PATH[?max_size=N]        a memory store's snapshot file
//	redis://…, rediss://…, unix://… Redis; prefix=, layout=, shards=
//	postgres://…, postgresql://…    PostgreSQL; table=, partitioned=, partition_span=
//
// A store only read (the source, the store of "stats", the destination of a
// dry run) is opened read-only: nothing is created or changed in it, and a
// table that does not exist is an error. A PostgreSQL table opens in the
// layout it has (plain or partitioned) unless the URL says partitioned=; a
// Redis prefix opens in the layout it records (plain, or compact with its
// shards) unless the URL says layout= and shards=, which must agree with it.
//
// "dedupe migrate" copies every live mark with its remaining TTL (package
// migrate says what is copied and why claims are not), a batch at a time,
// writing a checkpoint file after each batch the destination committed: run
// again after an interruption, it resumes after the last committed batch
// (--restart starts over). The checkpoint file is removed once the copy is
// complete. On a terminal it shows a progress bar; it ends with a summary:
// marks listed, copied, already present, skipped as expired, skipped as
// invalid. --dry-run reads both stores and writes nothing.
//
// "dedupe forget" drops the marks of the keys given (CHANNEL:MESSAGE_ID, as
// the store writes them), and the results kept with them, so that their
// messages are processed again when they are delivered again: an operator
// reprocessing a message after a bug fix. The store is -store's URL, or
// $DEDUPE_STORE's. It prints one line per key, "forgotten", "absent" (no
// live mark) or "refused" (a live claim holds the key: its message is being
// processed, and its mark may follow), and logs each mark it dropped to
// stderr at WARN, with the time, the key, the user, host and process that
// dropped it and the store (its URL with its secrets replaced by "xxxxx":
// the password, and every query value but the harmless options such as
// sslmode, prefix, table, db; see redact.go). The command prints no
// secret of a store URL anywhere, errors included. With $DEDUPE_MASK_KEY
// set, the audit records' keys are masked as the gateway's dedupelog.Mask
// masks them with that key (hashed with 16 bytes or more, so that they match
// the gateway's records; left out with fewer). A refused or failed key is
// left as it was; the others are done, and the exit status is 1. Only the
// store is changed: a gateway's memory front layer ([dedupe.LayeredStore])
// keeps its copy of the mark for its window, and a gateway running on a
// memory snapshot rewrites the file from its own memory (stop it first).
//
// "dedupe stats" prints the live marks and claims, their expiries, the
// store's sizes, its bytes per mark, and how many more marks fit where the
// store can tell: under Redis's maxmemory (with a note when the eviction
// policy is not noeviction), within PostgreSQL's shared_buffers, on the free
// disk of a SQLite file, or within a memory snapshot's max_size.
// docs/sizing.md says how to read them.
//
// Exit status: 0 on success, 1 on a failure (the copy so far stays
// committed and checkpointed; a key forget refused), 2 on a usage error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// errUsage marks an error in the command line.
var errUsage = errors.New("usage")

// errHelp reports that the command line asked for help (-h), which was
// printed: exit status 0.
var errHelp = errors.New("help requested")

const usage = `usage:
  dedupe migrate --from URL --to URL [--dry-run] [--batch N] [--checkpoint FILE] [--restart] [--no-expiry-ttl D]
  dedupe stats URL
  dedupe forget [-store URL] KEY...     KEY is CHANNEL:MESSAGE_ID; -store defaults to $DEDUPE_STORE

store URLs (the grammar of the library's deduperedis.OpenURL and postgres.Open;
docs/urls.md in github.com/gatewaykit/dedupe describes every option):
  sqlite:PATH[?table=T&tz=ZONE]      memory:SNAPSHOT[?max_size=N]
  redis://HOST:PORT/DB[?prefix=P&layout=plain|compact&shards=N]
  postgres://USER@HOST/DB[?table=T&partitioned=B&partition_span=D]
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	// No secret of a store URL is printed, whoever prints it (redact.go).
	secrets := argSecrets(args, os.Getenv(storeEnv))
	stdout, stderr = scrubbed(stdout, secrets), scrubbed(stderr, secrets)
	var err error
	switch args[0] {
	case "migrate":
		err = runMigrate(ctx, args[1:], stdout, stderr)
	case "stats":
		err = runStats(ctx, args[1:], stdout, stderr)
	case "forget":
		err = runForget(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		err = fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "dedupe: %v\n%s", err, usage)
		return exitUsage
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "dedupe: ") {
		msg = "dedupe: " + msg
	}
	fmt.Fprintln(stderr, msg)
	return exitFailure
}
