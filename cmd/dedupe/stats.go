package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/gatewaykit/dedupe/migrate"
)

func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stdout, usage)
		return nil
	}
	if len(args) != 1 {
		return fmt.Errorf("%w: stats takes one store URL", errUsage)
	}
	s, err := openStoreLog(ctx, args[0], source, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	st, err := migrate.Stats(ctx, s.Store)
	if err != nil {
		return err
	}
	c, err := measureCapacity(ctx, args[0], s.Store, st)
	if err != nil {
		return err
	}
	printStats(stdout, st, time.Now())
	printCapacity(stdout, c, st.Marks)
	return nil
}

func printStats(w io.Writer, st migrate.StoreStats, now time.Time) {
	fmt.Fprintf(w, "%-16s %s\n", "backend:", st.Backend)
	fmt.Fprintf(w, "%-16s %d\n", "live marks:", st.Marks)
	if st.Claims >= 0 {
		fmt.Fprintf(w, "%-16s %d\n", "live claims:", st.Claims)
	} else {
		fmt.Fprintf(w, "%-16s unknown\n", "live claims:")
	}
	for _, e := range []struct {
		name string
		t    time.Time
	}{{"oldest expiry:", st.Oldest}, {"newest expiry:", st.Newest}} {
		if e.t.IsZero() {
			fmt.Fprintf(w, "%-16s none\n", e.name)
			continue
		}
		fmt.Fprintf(w, "%-16s %s (in %s)\n", e.name, e.t.UTC().Format(time.RFC3339), e.t.Sub(now).Round(time.Second))
	}
	names := make([]string, 0, len(st.Sizes))
	for n := range st.Sizes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "%-16s %d bytes\n", "size "+n+":", st.Sizes[n])
	}
}
