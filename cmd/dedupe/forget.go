package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupelog"
)

// storeEnv names the environment variable "dedupe forget" takes its store's
// URL from when -store is not given.
const storeEnv = "DEDUPE_STORE"

// msgForgot is the message of the record "dedupe forget" logs for each key
// whose mark it dropped.
const msgForgot = "dedupe: forgot a processed message; it will be processed again"

// forgetFlags are the options of "dedupe forget".
type forgetFlags struct {
	store string
	keys  []dedupe.Key
}

// parseForget parses the command line of "dedupe forget": every key is
// checked before any store is opened.
func parseForget(args []string, stdout io.Writer) (forgetFlags, error) {
	var f forgetFlags
	fs := flag.NewFlagSet("dedupe forget", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&f.store, "store", os.Getenv(storeEnv), "the store's URL (default $"+storeEnv+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage+"\nforget options:\n")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return f, errHelp
		}
		return f, fmt.Errorf("%w: %v", errUsage, err)
	}
	switch {
	case f.store == "":
		return f, fmt.Errorf("%w: forget needs -store URL (or $%s)", errUsage, storeEnv)
	case fs.NArg() == 0:
		return f, fmt.Errorf("%w: forget needs at least one key, CHANNEL:MESSAGE_ID", errUsage)
	}
	for _, arg := range fs.Args() {
		k, err := dedupe.ParseKey(arg)
		if err != nil {
			return f, fmt.Errorf("%w: key %q: %v", errUsage, arg, err)
		}
		f.keys = append(f.keys, k)
	}
	return f, nil
}

// errRefused reports that forget refused at least one key: the command
// exits with a failure, after printing each.
var errRefused = errors.New("some keys were not forgotten")

// runForget runs "dedupe forget": it drops the mark of each key, printing
// per key what it did, and logs each mark dropped to stderr. A key held by
// a live claim (its message is being processed), or whose Forget failed, is
// left as it is; the other keys are still done, and the exit status is 1.
func runForget(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseForget(args, stdout)
	if err != nil {
		return err
	}
	s, err := openStoreLog(ctx, f.store, edit, stderr)
	if err != nil {
		return err
	}
	forgetter, ok := s.Store.(dedupe.Forgetter)
	if !ok {
		_ = s.close()
		return fmt.Errorf("the %s store cannot forget marks", s.Backend())
	}
	log := auditLogger(stderr, s.Backend(), f.store)
	refused := 0
	for _, k := range f.keys {
		forgotten, err := forgetter.Forget(ctx, k)
		switch {
		case errors.Is(err, dedupe.ErrInFlight):
			refused++
			fmt.Fprintf(stdout, "refused   %s: a live claim holds it (the message is being processed); try again once it is done\n", k)
		case err != nil:
			refused++
			fmt.Fprintf(stdout, "failed    %s: %v\n", k, err)
		case forgotten:
			log.Warn(msgForgot, "key", k.String())
			fmt.Fprintf(stdout, "forgotten %s\n", k)
		default:
			fmt.Fprintf(stdout, "absent    %s: no live mark; nothing to forget\n", k)
		}
	}
	if err := s.close(); err != nil {
		return err
	}
	if refused > 0 {
		return fmt.Errorf("forget: %d of %d keys: %w", refused, len(f.keys), errRefused)
	}
	return nil
}

// maskEnv names the environment variable whose value, when set, masks the
// message ids in forget's audit records as the gateway's dedupelog.Mask
// does with that key: hashed with a key of 16 bytes or more (the records of
// a message then match the gateway's), left out with a shorter one.
const maskEnv = "DEDUPE_MASK_KEY"

// auditLogger returns the logger of the marks forget drops: text records to
// w, with their time, naming who ran the command (the user, the host, the
// process) and the store (its URL without its secrets: [redactURL]); their
// keys masked if $DEDUPE_MASK_KEY is set.
func auditLogger(w io.Writer, backend, rawURL string) *slog.Logger {
	h := slog.Handler(slog.NewTextHandler(w, nil))
	if key, ok := os.LookupEnv(maskEnv); ok {
		h = dedupelog.Mask(h, dedupelog.Hash, []byte(key))
	}
	who := "unknown"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	host, _ := os.Hostname()
	return slog.New(h).With(
		"user", who, "host", host, "pid", os.Getpid(),
		"backend", backend, "store", redactURL(rawURL))
}
