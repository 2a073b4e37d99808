package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest/faultproxy"
)

// report is the outcome of a run.
type report struct {
	Store          string
	Instances      int
	Messages       int
	Seed           uint64
	InFlightStatus int
	Platform       platformStats

	// Totals over every gateway instance and both phases.
	Received                      int64
	Duplicates, InFlight, Failed  uint64
	StoreErrors                   uint64
	StoreCalls                    uint64
	StoreTime                     time.Duration
	FailedUpdates, FailedThenDone int // updates the core failed; of them, processed later
	Processed, Twice, Never       int // updates processed at least once, more than once, never
	PerProcess                    []summary
	SharedStore                   bool // the instances shared one store
	Restart                       bool
	Redelivered                   int // updates redelivered after the restart
	ProcessedAgain                int // processings after the restart of updates processed before
	FirstAfterRestart             int // processings after the restart of updates not processed before

	// With -fault: the faults and what the proxy did.
	Fault      string
	FaultStats faultproxy.Stats
	// With -fallback: the fallback store, the calls it served alone, the
	// marks queued for the primary, written to it and dropped, and the
	// processed updates found marked on the primary after the run.
	Fallback                    string
	Fallbacks                   uint64
	Deferred, Replayed, Dropped uint64
	OnPrimary                   int
	// Layers counts the claims each layer of a layered store answered.
	Layers map[string]uint64

	ExactlyOnce bool
	Elapsed     time.Duration
}

// newReport returns the report of a run of cfg on store spec, with faults f,
// before the run.
func newReport(cfg config, spec storeSpec, f faultSpec) report {
	rep := report{
		Store:          spec.String(),
		Instances:      cfg.Instances,
		Messages:       cfg.Messages,
		Seed:           cfg.Seed,
		InFlightStatus: cfg.InFlightStatus,
		SharedStore:    spec.durable() || cfg.Instances == 1,
		Restart:        spec.durable(),
		Fault:          f.String(),
	}
	if fb := cfg.fallbackSpec(); fb != nil {
		rep.Fallback = fb.String()
	}
	if cfg.Restart != nil {
		rep.Restart = *cfg.Restart
	}
	return rep
}

// total adds up the gateways' summaries and checks that each update was
// processed exactly once.
func (rep *report) total(msgs []message, sums []summary) {
	total := make(map[int64]int, len(msgs))
	failed := make(map[int64]bool)
	for _, s := range sums {
		rep.Received += s.Received
		rep.Duplicates += s.Duplicates
		rep.InFlight += s.InFlight
		rep.Failed += s.Failed
		rep.StoreErrors += s.StoreErrors
		rep.StoreCalls += s.StoreCalls
		rep.StoreTime += s.StoreTime
		rep.Fallbacks += s.Fallbacks
		rep.Deferred += s.Deferred
		rep.Replayed += s.Replayed
		rep.Dropped += s.Dropped
		for layer, n := range s.Layers {
			if rep.Layers == nil {
				rep.Layers = make(map[string]uint64)
			}
			rep.Layers[layer] += n
		}
		for id, n := range s.Processed {
			total[id] += n
		}
		for id := range s.CoreFailures {
			failed[id] = true
		}
	}
	for _, m := range msgs {
		n := total[m.id]
		if n == 0 {
			rep.Never++
			continue
		}
		rep.Processed++
		if n > 1 {
			rep.Twice++
		}
	}
	rep.FailedUpdates = len(failed)
	for id := range failed {
		if total[id] > 0 {
			rep.FailedThenDone++
		}
	}
	rep.ExactlyOnce = rep.Never == 0 && rep.Twice == 0
}

// markedOn opens the store s selects and counts the updates of msgs marked
// on it.
func markedOn(ctx context.Context, s storeSpec, msgs []message) (int, error) {
	st, err := openStore(ctx, s)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	n := 0
	for _, m := range msgs {
		ok, err := st.Exists(ctx, dedupe.Key{Channel: "telegram", MessageID: strconv.FormatInt(m.id, 10)})
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// write prints the report.
func (r report) write(w io.Writer) {
	gateways := "1 gateway"
	if r.Instances > 1 {
		gateways = fmt.Sprintf("%d gateway processes", r.Instances)
	}
	fmt.Fprintf(w, "gateway: store %s, %s, %d Telegram updates, seed %d\n", r.Store, gateways, r.Messages, r.Seed)
	pl := r.Platform
	fmt.Fprintf(w, "  platform requests     %5d  (%d updates, %d concurrent copies, %d retries after a client timeout, %d after a 5xx; %d given up)\n",
		pl.Requests, pl.Updates-int64(r.Redelivered), pl.Copies, pl.TimeoutRetries, pl.ErrorRetries, pl.GaveUp+pl.Rejected)
	if r.Instances > 1 {
		fmt.Fprintf(w, "  gateway processes    ")
		for i, s := range r.PerProcess {
			sep := ";"
			if i == len(r.PerProcess)-1 {
				sep = ""
			}
			fmt.Fprintf(w, " pid %d: %d received, %d processed%s", s.PID, s.Received, len(s.Processed), sep)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  deliveries received   %5d\n", r.Received)
	fmt.Fprintf(w, "  duplicates suppressed %5d  (answered 200)\n", r.Duplicates)
	inFlight := fmt.Sprintf("answered %d, the platform retried later", r.InFlightStatus)
	if !retried(r.InFlightStatus) {
		inFlight = fmt.Sprintf("answered %d: the platform stopped", r.InFlightStatus)
	}
	fmt.Fprintf(w, "  in-flight collisions  %5d  (%s)\n", r.InFlight, inFlight)
	fmt.Fprintf(w, "  failed deliveries     %5d  (core failed, claim released; %d of %d such updates processed on a retry)\n",
		r.Failed, r.FailedThenDone, r.FailedUpdates)
	if r.StoreCalls > 0 {
		avg := (r.StoreTime / time.Duration(r.StoreCalls)).Round(time.Microsecond)
		fmt.Fprintf(w, "  store calls           %5d  (claims, marks and releases: %v on average; %d errors)\n",
			r.StoreCalls, avg, r.StoreErrors)
	}
	r.writeLayersAndFaults(w)
	fmt.Fprintf(w, "  updates processed     %5d of %d  (%d more than once, %d never)\n", r.Processed, r.Messages, r.Twice, r.Never)
	if r.Never > 0 && !retried(r.InFlightStatus) {
		fmt.Fprintf(w, "  note: a copy answered %d while in flight stops the platform; when the copy in flight then fails, the update is lost\n",
			r.InFlightStatus)
	}
	switch {
	case r.Restart:
		what := "gateway stopped, store closed, reopened by a new gateway"
		if r.Instances > 1 {
			what = "gateway processes stopped, new ones started on the store"
		}
		fmt.Fprintf(w, "  restart               %s; %d updates redelivered, %d processed again\n",
			what, r.Redelivered, r.ProcessedAgain)
		if r.FirstAfterRestart > 0 {
			fmt.Fprintf(w, "  note: %d redelivered updates had not been processed before the restart (the platform had given up)\n",
				r.FirstAfterRestart)
		}
		if r.ProcessedAgain > 0 && r.Store == "memory" {
			fmt.Fprintln(w, "  note: a memory store forgets on restart; -store sqlite:gateway.db remembers")
		}
	case r.Store == "memory":
		fmt.Fprintln(w, "  restart               not run: a memory store forgets on restart (-restart shows it; -store sqlite:gateway.db remembers)")
	default:
		fmt.Fprintln(w, "  restart               not run (-restart=false)")
	}
	if !r.SharedStore {
		fmt.Fprintln(w, "  note: each gateway process has its own memory store; share one with -store redis://… or sqlite:PATH")
	}
	verdict := "yes"
	if !r.ExactlyOnce {
		verdict = "no"
	}
	fmt.Fprintf(w, "processed exactly once: %s  (%.1fs)\n", verdict, r.Elapsed.Seconds())
}

// writeLayersAndFaults prints the lines of the layered store, the faults and
// the fallback, for the runs that have them.
func (r report) writeLayersAndFaults(w io.Writer) {
	if r.Layers != nil {
		fmt.Fprintf(w, "  claims answered by    %s\n", layerCounts(r.Layers))
	}
	if r.Fault != "" {
		fs := r.FaultStats
		fmt.Fprintf(w, "  faults on the way     %s: %d connections, %d dropped by a lost chunk, %d cut by the outage\n",
			r.Fault, fs.Accepted, fs.Lost, fs.Cut)
	}
	if r.Fallback != "" {
		fmt.Fprintf(w, "  fallback              %s: %d calls served by it alone; %d marks queued for the primary, %d written, %d dropped\n",
			r.Fallback, r.Fallbacks, r.Deferred, r.Replayed, r.Dropped)
		fmt.Fprintf(w, "  marks on the primary  %5d of %d processed updates, checked after the run\n", r.OnPrimary, r.Processed)
	}
}

// layerCounts formats the claims each layer answered, front layers first.
func layerCounts(m map[string]uint64) string {
	names := slices.Sorted(maps.Keys(m))
	slices.Reverse(names) // "transport…" before "business"
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", name, m[name])
	}
	return b.String()
}
