package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe/migrate"
)

// migrateFlags are the options of "dedupe migrate".
type migrateFlags struct {
	from, to, checkpoint string
	dryRun, restart      bool
	batch                int
	noExpiryTTL          time.Duration
}

// parseMigrate parses the command line of "dedupe migrate". Asked for help
// (-h), it writes the usage and the options to stdout and returns errHelp;
// an error is left for run to print, once, with the usage.
func parseMigrate(args []string, stdout io.Writer) (migrateFlags, error) {
	var f migrateFlags
	fs := flag.NewFlagSet("dedupe migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&f.from, "from", "", "the source store's URL")
	fs.StringVar(&f.to, "to", "", "the destination store's URL")
	fs.BoolVar(&f.dryRun, "dry-run", false, "read both stores and count, writing nothing")
	fs.IntVar(&f.batch, "batch", migrate.DefaultBatch, "marks read and written at a time")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "the checkpoint file (default .dedupe-migrate-HASH.json in the current directory, HASH naming the two URLs)")
	fs.BoolVar(&f.restart, "restart", false, "ignore a checkpoint and copy from the start")
	fs.DurationVar(&f.noExpiryTTL, "no-expiry-ttl", migrate.DefaultNoExpiryTTL, "TTL given to marks that never expire at the source")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage+"\nmigrate options:\n")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return f, errHelp
		}
		return f, fmt.Errorf("%w: %v", errUsage, err)
	}
	switch {
	case fs.NArg() > 0:
		return f, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	case f.from == "" || f.to == "":
		return f, fmt.Errorf("%w: migrate needs --from and --to", errUsage)
	case f.from == f.to:
		return f, fmt.Errorf("%w: --from and --to name the same store", errUsage)
	case f.batch <= 0:
		return f, fmt.Errorf("%w: --batch must be positive", errUsage)
	case f.noExpiryTTL < 0:
		return f, fmt.Errorf("%w: --no-expiry-ttl %v is negative: want a positive duration (0: the default, %v)",
			errUsage, f.noExpiryTTL, migrate.DefaultNoExpiryTTL)
	}
	if f.checkpoint == "" {
		f.checkpoint = ".dedupe-migrate-" + f.runID()[:16] + ".json"
	}
	return f, nil
}

// runID names the pair of stores, so that a checkpoint is never resumed into
// another copy.
func (f migrateFlags) runID() string {
	sum := sha256.Sum256([]byte(f.from + "\x00" + f.to))
	return hex.EncodeToString(sum[:])
}

// checkpointFile is what the checkpoint file holds.
type checkpointFile struct {
	Run        string             `json:"run"` // migrateFlags.runID
	Checkpoint migrate.Checkpoint `json:"checkpoint"`
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseMigrate(args, stdout)
	if err != nil {
		return err
	}
	if !f.dryRun {
		removeStaleTemps(f.checkpoint)
	}
	var resume *migrate.Checkpoint
	if !f.restart && !f.dryRun {
		if resume, err = readCheckpoint(f); err != nil {
			return err
		}
	}
	from, err := openStoreLog(ctx, f.from, source, stderr)
	if err != nil {
		return fmt.Errorf("open --from: %w", err)
	}
	defer from.close()
	to, err := openDestination(ctx, f, stdout, stderr)
	if err != nil {
		return fmt.Errorf("open --to: %w", err)
	}
	defer to.close()
	if resume != nil {
		fmt.Fprintf(stdout, "resuming from %s after %d marks\n", f.checkpoint, resume.Summary.Listed)
	}
	bar := newProgress(ctx, stdout, from.Store)
	opts := migrate.Options{Batch: f.batch, DryRun: f.dryRun, Resume: resume, NoExpiryTTL: f.noExpiryTTL, Progress: bar.update}
	if !f.dryRun {
		opts.Checkpoint = func(cp migrate.Checkpoint) error { return writeCheckpoint(f, cp) }
	}
	sum, err := migrate.Copy(ctx, from.Store, to.Store, opts) // to.Store is nil for a destination to be created
	bar.finish()
	printSummary(stdout, sum, f.dryRun)
	if err != nil {
		if errors.Is(err, context.Canceled) && !f.dryRun {
			return fmt.Errorf("interrupted; run the same command again to resume from %s: %w", f.checkpoint, err)
		}
		return err
	}
	if !f.dryRun {
		if err := to.close(); err != nil { // a memory destination writes its snapshot
			return fmt.Errorf("close --to: %w", err)
		}
		if err := os.Remove(f.checkpoint); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// openDestination opens the store of --to: for writing, or read-only for a
// dry run. A dry run into a destination that does not exist yet (a SQLite
// file that is missing or has no table, a PostgreSQL table that is missing)
// says what a copy would create, creates nothing, and returns a store whose
// Store is nil, which holds no mark; a destination that a copy could not
// create either (a SQLite file in a missing directory) is still an error.
func openDestination(ctx context.Context, f migrateFlags, stdout, stderr io.Writer) (*store, error) {
	if !f.dryRun {
		return openStoreLog(ctx, f.to, dest, stderr)
	}
	to, err := openStoreLog(ctx, f.to, dryDest, stderr)
	if err == nil {
		return to, nil
	}
	what, ok := toBeCreated(f.to, err)
	if !ok {
		return nil, err
	}
	fmt.Fprintf(stdout, "dry run: the destination does not exist yet (%v): a copy would create %s\n", err, what)
	return &store{nil, func() error { return nil }}, nil
}

// toBeCreated reports whether err, the error of opening the destination raw
// read-only, says that it does not exist yet in a way a copy would mend, and
// what the copy would create.
func toBeCreated(raw string, err error) (string, bool) {
	scheme, rest, _ := strings.Cut(raw, ":")
	switch scheme {
	case "sqlite":
		path, q, perr := splitQuery(rest)
		if perr != nil {
			return "", false
		}
		table := q.Get("table")
		if table == "" {
			table = "the store's table"
		} else {
			table = "table " + table
		}
		if errors.Is(err, fs.ErrNotExist) {
			if st, serr := os.Stat(filepath.Dir(path)); serr != nil || !st.IsDir() {
				return "", false // a copy cannot create the directory either
			}
			return "the SQLite file " + path + " with " + table, true
		}
		if strings.Contains(err.Error(), "does not exist") {
			return table + " in the SQLite file " + path, true
		}
	case "postgres", "postgresql":
		if strings.Contains(err.Error(), "does not exist") && strings.Contains(err.Error(), "table") {
			return "it", true
		}
	}
	return "", false
}

func printSummary(w io.Writer, s migrate.Summary, dryRun bool) {
	copied := "copied:"
	if dryRun {
		fmt.Fprintln(w, "dry run: nothing written")
		copied = "would copy:"
	}
	fmt.Fprintf(w, "%-20s %d\n", "listed:", s.Listed)
	fmt.Fprintf(w, "%-20s %d\n", copied, s.Copied)
	fmt.Fprintf(w, "%-20s %d\n", "already present:", s.Present)
	fmt.Fprintf(w, "%-20s %d\n", "skipped as expired:", s.Expired)
	fmt.Fprintf(w, "%-20s %d\n", "skipped as invalid:", s.Invalid)
}

// readCheckpoint returns the checkpoint of an earlier run of the same copy,
// or nil if there is none.
func readCheckpoint(f migrateFlags) (*migrate.Checkpoint, error) {
	data, err := os.ReadFile(f.checkpoint)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	var cf checkpointFile
	if err := json.Unmarshal(data, &cf); err != nil {
		return nil, fmt.Errorf("checkpoint %s is unreadable (%v); remove it or pass --restart", f.checkpoint, err)
	}
	if cf.Run != f.runID() {
		return nil, fmt.Errorf("checkpoint %s belongs to a copy between other stores; pass --checkpoint, or --restart to overwrite it", f.checkpoint)
	}
	return &cf.Checkpoint, nil
}

// writeCheckpoint replaces the checkpoint file with cp, durably: a new file
// renamed over the old after it was synced, so a crash leaves either whole.
func writeCheckpoint(f migrateFlags, cp migrate.Checkpoint) error {
	data, err := json.Marshal(checkpointFile{Run: f.runID(), Checkpoint: cp})
	if err != nil {
		return err
	}
	dir := filepath.Dir(f.checkpoint)
	tmp, err := os.CreateTemp(dir, filepath.Base(f.checkpoint)+tempPattern)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.checkpoint)
	}
	return err
}

// tempPattern ends the name of a checkpoint file being written, before it
// is renamed over the checkpoint: os.CreateTemp puts a random string at '*'.
const tempPattern = ".*.tmp"

// removeStaleTemps removes the temporary files that writeCheckpoint left
// beside checkpoint when the process was killed inside a write: a
// checkpoint is only ever the renamed file, so they hold nothing to keep.
func removeStaleTemps(checkpoint string) {
	dir, base := filepath.Dir(checkpoint), filepath.Base(checkpoint)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); e.Type().IsRegular() && strings.HasPrefix(n, base+".") && strings.HasSuffix(n, ".tmp") &&
			len(n) > len(base)+len(".tmp") {
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
}
