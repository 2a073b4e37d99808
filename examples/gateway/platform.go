package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Platform settings: a webhook delivery is retried until it is answered 2xx,
// at most maxAttempts times per copy.
const (
	// clientTimeout is how long the platform waits for an answer. It is longer
	// than the core's usual latency and shorter than its slow calls.
	clientTimeout = 35 * time.Millisecond
	// requestTimeout bounds a whole request, connection included.
	requestTimeout = 5 * time.Second
	// backoffBase and backoffMax bound the wait before a retry: it doubles
	// from backoffBase at each attempt, up to backoffMax, ±50%. A copy is given
	// up after maxAttempts attempts, over three seconds or more: much shorter
	// than a real platform's window (Telegram retries for hours), long enough
	// for a slow gateway on a loaded machine.
	backoffBase = 10 * time.Millisecond
	backoffMax  = 250 * time.Millisecond
	maxAttempts = 16
	// With -fault the platform is as patient as a real one, within reason:
	// at most patientAttempts attempts, waiting up to patientBackoffMax, over
	// two minutes or more, which outlasts a claim's lease and a store's
	// outage.
	patientBackoffMax = 2 * time.Second
	patientAttempts   = 80
	// patientTimeout is the client timeout of a patient platform: Slack's 3
	// seconds. The gateway's slow store calls would outlast clientTimeout
	// every time, and each retry would add work to the faulty network.
	patientTimeout = 3 * time.Second
	// concurrency is the number of updates the platform delivers at a time.
	concurrency = 16
	// copyShare is the share of updates sent as 2 or 3 copies at once, as
	// several proxy workers would.
	copyShare = 0.15
)

// message is one update as the platform sends it.
type message struct {
	id   int64
	body []byte
}

// lastID is the end of the update ids that runs in this process took.
var lastID atomic.Int64

// idBase returns the first of n update ids for a run: from the clock, so
// that runs on one durable store do not see each other's updates, and after
// every id an earlier run in this process took (tests run in parallel).
func idBase(n int) int64 {
	for {
		last := lastID.Load()
		base := max(time.Now().UnixMilli()*1000, last)
		if lastID.CompareAndSwap(last, base+int64(n)) {
			return base
		}
	}
}

// newMessages returns n Telegram updates with consecutive ids from base.
func newMessages(base int64, n int) []message {
	msgs := make([]message, n)
	for i := range msgs {
		id := base + int64(i)
		chat := 1000 + i%7
		msgs[i] = message{id: id, body: fmt.Appendf(nil,
			`{"update_id":%d,"message":{"message_id":%d,"date":%d,"chat":{"id":%d,"type":"private"},`+
				`"from":{"id":%d,"is_bot":false,"first_name":"Ada"},"text":"question #%d"}}`,
			id, 1+i, 1_767_225_600+i, chat, chat, i)}
	}
	return msgs
}

// platformStats counts what the platform sent.
type platformStats struct {
	Requests       int64 // HTTP requests sent
	Updates        int64 // updates delivered (first copies)
	Copies         int64 // extra copies sent at the same time as the first
	TimeoutRetries int64 // retries after a client timeout
	ErrorRetries   int64 // retries after a 5xx answer or a connection error
	GaveUp         int64 // copies never answered 2xx within maxAttempts
	Rejected       int64 // copies answered 4xx (a bug: the platform sends valid updates)
}

// platform is the simulated chat platform: it delivers each update at least
// once to one of the gateway URLs, retrying on client timeouts and on 5xx
// answers, and sends some updates as concurrent copies.
type platform struct {
	client      *http.Client
	transport   *http.Transport
	maxAttempts int
	backoffMax  time.Duration

	mu  sync.Mutex
	rng *rand.Rand

	requests, updates, copies    atomic.Int64
	timeoutRetries, errorRetries atomic.Int64
	gaveUp, rejected             atomic.Int64
}

// newPlatform returns a platform whose random choices follow seed; a patient
// one retries for minutes rather than seconds.
func newPlatform(seed uint64, patient bool) *platform {
	tr := &http.Transport{
		Proxy:               nil, // deliveries go straight to the loopback gateways
		MaxIdleConnsPerHost: 4 * concurrency,
		// The timeout runs from the request's last byte to the answer's
		// headers: the time the gateway takes, not the time to connect.
		ResponseHeaderTimeout: clientTimeout,
	}
	if patient {
		tr.ResponseHeaderTimeout = patientTimeout
	}
	p := &platform{
		client:      &http.Client{Transport: tr, Timeout: requestTimeout},
		transport:   tr,
		maxAttempts: maxAttempts,
		backoffMax:  backoffMax,
		rng:         rand.New(rand.NewPCG(seed, 0x5eed)),
	}
	if patient {
		p.maxAttempts, p.backoffMax = patientAttempts, patientBackoffMax
	}
	return p
}

// close closes the platform's idle connections.
func (p *platform) close() { p.transport.CloseIdleConnections() }

// stats returns the counts so far.
func (p *platform) stats() platformStats {
	return platformStats{
		Requests:       p.requests.Load(),
		Updates:        p.updates.Load(),
		Copies:         p.copies.Load(),
		TimeoutRetries: p.timeoutRetries.Load(),
		ErrorRetries:   p.errorRetries.Load(),
		GaveUp:         p.gaveUp.Load(),
		Rejected:       p.rejected.Load(),
	}
}

// float64 and intN draw from the platform's seeded generator.
func (p *platform) float64() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Float64()
}

func (p *platform) intN(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.IntN(n)
}

// deliver delivers msgs to the gateways at urls, concurrency updates at a
// time, each to a URL picked at random (and each retry too, as a load balancer
// would). With copies, some updates are sent as 2 or 3 copies at once, each
// retried on its own. deliver returns when every copy was answered 2xx or
// given up, or when ctx is done.
//
// deliver closes its idle connections before it returns: a connection the
// transport opened but never used would hold up the gateway's
// [http.Server.Shutdown] for 5 seconds.
func (p *platform) deliver(ctx context.Context, urls []string, msgs []message, copies bool) {
	defer p.transport.CloseIdleConnections()
	var wg sync.WaitGroup
	sem := make(chan struct{}, concurrency)
	for _, m := range msgs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		n := 1
		if copies && p.float64() < copyShare {
			n = 2 + p.intN(2)
		}
		p.updates.Add(1)
		p.copies.Add(int64(n - 1))
		wg.Go(func() {
			defer func() { <-sem }()
			var cw sync.WaitGroup
			for range n {
				cw.Go(func() { p.send(ctx, urls, m) })
			}
			cw.Wait()
		})
	}
	wg.Wait()
}

// send delivers one copy of m until it is answered 2xx, for at most
// maxAttempts attempts.
func (p *platform) send(ctx context.Context, urls []string, m message) {
	for attempt := 1; ; attempt++ {
		status, err := p.post(ctx, urls[p.intN(len(urls))], m.body)
		if ctx.Err() != nil {
			return
		}
		timedOut := false
		switch {
		case err != nil:
			var ne net.Error
			timedOut = errors.As(err, &ne) && ne.Timeout()
		case status >= 200 && status < 300:
			return
		case retried(status):
		default: // another 4xx: a retry would be refused the same way
			p.rejected.Add(1)
			return
		}
		if attempt == p.maxAttempts {
			p.gaveUp.Add(1)
			return
		}
		if timedOut {
			p.timeoutRetries.Add(1)
		} else {
			p.errorRetries.Add(1)
		}
		t := time.NewTimer(backoff(attempt, p.backoffMax, p.float64()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// backoff returns the wait before attempt+1, at most most ±50%, with jitter
// r in [0, 1).
func backoff(attempt int, most time.Duration, r float64) time.Duration {
	d := most
	if attempt < 16 {
		d = min(backoffBase<<(attempt-1), most)
	}
	return time.Duration(float64(d) * (0.5 + r))
}

// post sends one delivery and returns the answer's status.
func (p *platform) post(ctx context.Context, url string, body []byte) (int, error) {
	p.requests.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}
