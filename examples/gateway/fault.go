package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe/dedupetest/faultproxy"
)

// faultSpec is the -fault flag: network faults put between the gateways and
// the server of their store, the deployment checklist of the ClawBridge
// gateway design ("30% packet loss and 500 ms latency between gateway and
// stores, no message lost or duplicated"; "Redis failing over to
// PostgreSQL").
type faultSpec struct {
	// Loss is the share of chunks of bytes lost, either way. TCP cannot lose
	// bytes in a stream and carry on, so a lost chunk drops its connection
	// when it was due, and the client dials again through the same losses.
	Loss float64
	// Latency is added to every round trip, half each way.
	Latency time.Duration
	// Down makes the server unreachable for this long (every connection
	// dropped, every new one too), from outageStart after the first
	// deliveries; then it comes back.
	Down time.Duration
}

// outageStart is when a -fault down=D outage begins, after the platform's
// first deliveries: the gateways have warmed up on the primary store, and
// most deliveries are still to come.
const outageStart = 50 * time.Millisecond

// parseFault reads the value of -fault: comma-separated loss=F (0 to 1),
// latency=DURATION and down=DURATION, as in "loss=0.3,latency=500ms". The
// empty string is no fault.
func parseFault(s string) (faultSpec, error) {
	var f faultSpec
	if s == "" {
		return f, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(part), "=")
		var err error
		switch name {
		case "loss":
			f.Loss, err = strconv.ParseFloat(value, 64)
			if err == nil && !(f.Loss >= 0 && f.Loss < 1) {
				err = fmt.Errorf("want 0 to 1 (1 would lose everything; down=D does that for a while)")
			}
		case "latency":
			f.Latency, err = parseDuration(value)
		case "down":
			f.Down, err = parseDuration(value)
		default:
			return f, fmt.Errorf("-fault %q: unknown fault %q; want loss=F, latency=D or down=D", s, name)
		}
		if err != nil {
			return f, fmt.Errorf("-fault %q: %s: %w", s, name, err)
		}
	}
	return f, nil
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil && (d < 0 || d > 10*time.Minute) {
		err = fmt.Errorf("%v: want 0 to 10m", d)
	}
	return d, err
}

// none reports whether f puts no fault.
func (f faultSpec) none() bool { return f == faultSpec{} }

// String returns f for the report.
func (f faultSpec) String() string {
	var parts []string
	if f.Loss > 0 {
		parts = append(parts, fmt.Sprintf("%g%% of chunks lost (each drops its connection)", 100*f.Loss))
	}
	if f.Latency > 0 {
		parts = append(parts, fmt.Sprintf("%v added to each round trip", f.Latency))
	}
	if f.Down > 0 {
		parts = append(parts, fmt.Sprintf("server down for %v", f.Down))
	}
	return strings.Join(parts, ", ")
}

// faults is a fault proxy in front of the store's server. It forwards
// without fault until begin, so that gateways open their stores first: the
// faults are those of a run, between begin and end.
type faults struct {
	spec  faultSpec
	proxy *faultproxy.Proxy

	mu     sync.Mutex
	on     bool          // between begin and end
	down   bool          // the outage is on
	outage chan struct{} // closed when the outage is over; nil before it began
	stop   chan struct{} // closed by close
}

// startFaults starts a proxy in front of the server of store (the back store
// of a layered one), and returns the store reached through it.
func startFaults(store storeSpec, f faultSpec) (*faults, storeSpec, error) {
	back := store.back() // config.check made sure it is on a server
	u, err := url.Parse(back.target)
	if err != nil || u.Host == "" {
		return nil, store, fmt.Errorf("-fault: the store URL %s names no host:port for the proxy to forward to", redactURL(back.target))
	}
	target := u.Host
	if u.Port() == "" {
		port := "6379"
		if back.kind == "postgres" {
			port = "5432"
		}
		target = u.Host + ":" + port
	}
	p, err := faultproxy.Start(target)
	if err != nil {
		return nil, store, err
	}
	u.Host = p.Addr()
	proxied := storeSpec{kind: back.kind, target: u.String()}
	if store.kind == "layered" {
		proxied = storeSpec{kind: "layered", target: u.String()}
	}
	return &faults{spec: f, proxy: p, stop: make(chan struct{})}, proxied, nil
}

// begin puts the faults on the way; the first begin also starts the outage
// of -fault down=D, outageStart later.
func (fs *faults) begin() {
	if fs == nil {
		return
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.on = true
	fs.apply()
	if fs.spec.Down > 0 && fs.outage == nil {
		fs.outage = make(chan struct{})
		go fs.runOutage()
	}
}

// end waits until the outage is over, if one began, and takes the faults off
// the way: the gateways then stop and write what they queued for the store.
func (fs *faults) end(ctx context.Context) {
	if fs == nil {
		return
	}
	fs.mu.Lock()
	outage := fs.outage
	fs.mu.Unlock()
	if outage != nil {
		select {
		case <-outage:
		case <-ctx.Done():
		}
	}
	fs.mu.Lock()
	fs.on = false
	fs.apply()
	fs.mu.Unlock()
}

// apply sets the proxy's faults for the current state; fs.mu is held.
func (fs *faults) apply() {
	switch {
	case fs.down:
		fs.proxy.SetLoss(1)
		fs.proxy.Cut()
	case fs.on:
		fs.proxy.SetLoss(fs.spec.Loss)
		fs.proxy.SetLatency(fs.spec.Latency / 2)
	default:
		fs.proxy.SetLoss(0)
		fs.proxy.SetLatency(0)
	}
}

// runOutage makes the server unreachable for spec.Down, from outageStart on.
func (fs *faults) runOutage() {
	defer close(fs.outage)
	if !fs.sleep(outageStart) {
		return
	}
	fs.mu.Lock()
	fs.down = true
	fs.apply()
	fs.mu.Unlock()
	fs.sleep(fs.spec.Down)
	fs.mu.Lock()
	fs.down = false
	fs.apply()
	fs.mu.Unlock()
}

// sleep waits d, or until close; it reports whether d passed.
func (fs *faults) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-fs.stop:
		return false
	}
}

// stats returns what the proxy did.
func (fs *faults) stats() faultproxy.Stats {
	if fs == nil {
		return faultproxy.Stats{}
	}
	return fs.proxy.Stats()
}

// close ends the outage and stops the proxy.
func (fs *faults) close() {
	if fs == nil {
		return
	}
	close(fs.stop)
	fs.mu.Lock()
	outage := fs.outage
	fs.mu.Unlock()
	if outage != nil {
		<-outage
	}
	_ = fs.proxy.Close()
}
