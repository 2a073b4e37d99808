// Package faultproxy is a TCP proxy for tests that puts network faults
// between a client and a real server: on command it swallows the server's
// replies, delays the traffic both ways, loses a share of it, or cuts every
// connection. The Redis and PostgreSQL stores' fault tests and the gateway
// example's -fault mode put it in front of their servers.
//
// A byte stream never loses bytes in its middle and carries on (TCP delivers
// all of a stream or fails it), so a connection that had a reply swallowed
// stays silent, swallowing every later reply too, until it is cut. A client
// therefore never reads a reply meant for another request: it times out, or
// sees its connection fail. For the same reason a lost packet ([Proxy.SetLoss])
// is a dropped connection, which the client must notice and open again: what
// TCP makes of heavy loss it cannot retransmit through.
package faultproxy

import (
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Proxy forwards the connections it accepts on a loopback port to a target
// address. It is safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and every link's goroutines

	mu      sync.Mutex
	links   map[*link]struct{}
	drop    bool
	latency time.Duration
	loss    float64
	closed  bool
	stats   Stats
}

// Stats counts what a Proxy did.
type Stats struct {
	Accepted  int   // connections accepted
	Silenced  int   // connections that swallowed a reply, and went silent
	Cut       int   // connections cut by Cut, CutClients or Close
	Dropped   int64 // reply bytes swallowed
	Lost      int   // chunks lost by SetLoss, each dropping its connection
	Requested int64 // bytes read from the clients, to be sent to the server
}

// Start listens on a free loopback port and forwards each connection it
// accepts to target. Close stops it.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, links: make(map[*link]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address clients dial to reach the target through p.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// DropReplies starts (on true) or stops swallowing the bytes the server sends.
// A connection that had bytes swallowed goes on swallowing them until it is
// cut; connections opened after DropReplies(false) are served normally.
func (p *Proxy) DropReplies(on bool) {
	p.mu.Lock()
	p.drop = on
	p.mu.Unlock()
}

// SetLatency delays every chunk of bytes, both ways, by d from when the proxy
// read it; zero forwards at once. Order is kept.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = max(d, 0)
	p.mu.Unlock()
}

// SetLoss loses each chunk of bytes, either way, with probability rate (0 to
// 1; zero loses none). A lost chunk is never written, and its connection is
// dropped, both sides, when the chunk was due: the bytes before it arrive, the
// ones after it never do. The client sees its connection fail mid-request or
// mid-reply and must dial again, through the same losses.
func (p *Proxy) SetLoss(rate float64) {
	p.mu.Lock()
	p.loss = min(max(rate, 0), 1)
	p.mu.Unlock()
}

// Cut closes every open connection, both the client's and the server's side,
// and returns how many it cut. New connections are accepted as before.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.stats.Cut += len(links)
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	return len(links)
}

// CutClients closes the client's side of every open connection and returns
// how many it cut. Unlike [Proxy.Cut], the bytes already read from a client
// still reach the server, each when it is due ([Proxy.SetLatency]), before the
// server's side is closed: the client sees its connection fail while its
// request is still on the way, and the server carries the request out later,
// after whatever the client did next (a retry on a new connection).
func (p *Proxy) CutClients() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		if !l.clientCut {
			l.clientCut = true
			links = append(links, l)
		}
	}
	p.stats.Cut += len(links)
	p.mu.Unlock()
	for _, l := range links {
		_ = l.client.Close()
	}
	return len(links)
}

// Stats returns what p did so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops accepting, cuts every connection and waits for the proxy's
// goroutines to return. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{p: p, client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close()
			return
		}
		p.links[l] = struct{}{}
		p.stats.Accepted++
		p.mu.Unlock()
		p.wg.Add(4)
		up := make(chan chunk, chunkQueue)
		down := make(chan chunk, chunkQueue)
		go l.read(c, up, false)
		go l.write(s, up)
		go l.read(s, down, true)
		go l.write(c, down)
	}
}

// link is one proxied connection: the client's side and the server's.
type link struct {
	p              *Proxy
	client, server net.Conn
	once           sync.Once
	silent         bool // a reply was swallowed: swallow the rest too (guarded by p.mu)
	clientCut      bool // CutClients closed the client's side (guarded by p.mu)
}

// chunk is bytes read from one side, due to be written to the other. A lost
// chunk drops the link when it is due instead.
type chunk struct {
	b    []byte
	due  time.Time
	lost bool
}

const (
	chunkSize  = 32 << 10
	chunkQueue = 64
)

// read copies from src into q until src fails, swallowing replies while the
// proxy drops them and losing chunks at the proxy's loss rate, and closes the
// link when it ends (a lost chunk ends it).
func (l *link) read(src net.Conn, q chan<- chunk, reply bool) {
	defer l.p.wg.Done()
	defer close(q)
	lost := false
	defer func() {
		// After a lost chunk the writer drops the link when it is due; after
		// CutClients it closes the link once it sent what was read.
		if !lost && (reply || !l.cutByProxy()) {
			l.close()
		}
	}()
	for {
		b := make([]byte, chunkSize)
		n, err := src.Read(b)
		if n > 0 {
			l.p.mu.Lock()
			latency := l.p.latency
			lost = l.p.loss > 0 && rand.Float64() < l.p.loss
			if lost {
				l.p.stats.Lost++
			}
			if !reply {
				l.p.stats.Requested += int64(n)
			}
			if reply && (l.p.drop || l.silent) {
				if !l.silent {
					l.silent = true
					l.p.stats.Silenced++
				}
				l.p.stats.Dropped += int64(n)
				n = 0
			}
			l.p.mu.Unlock()
			if lost {
				// Nothing after a lost chunk is forwarded: the writer drops
				// the link when it was due.
				q <- chunk{due: time.Now().Add(latency), lost: true}
				return
			}
			if n > 0 {
				q <- chunk{b: b[:n], due: time.Now().Add(latency)}
			}
		}
		if err != nil {
			return
		}
	}
}

// write writes the chunks of q to dst, each when it is due, until q is
// closed or dst fails.
func (l *link) write(dst net.Conn, q <-chan chunk) {
	defer l.p.wg.Done()
	defer l.close()
	var timer *time.Timer
	for c := range q {
		if wait := time.Until(c.due); wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			<-timer.C
		}
		if c.lost {
			l.close() // the lost chunk was due: drop the connection
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			if dst == l.client && l.cutByProxy() {
				continue // the server's side stays open until the request is sent
			}
			for range q { // let the reader finish
			}
			return
		}
	}
}

// cutByProxy reports whether CutClients closed the client's side.
func (l *link) cutByProxy() bool {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.clientCut
}

// close closes both sides, once, and forgets the link.
func (l *link) close() {
	l.once.Do(func() {
		_ = l.client.Close()
		_ = l.server.Close()
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	})
}
