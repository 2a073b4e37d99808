package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoServer answers each line it reads with the same line, until the test
// ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c) })
		}
	})
	return ln.Addr().String()
}

func startProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// client is one connection through the proxy.
type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

// ask sends line and returns the reply, or the error of reading it within
// wait.
func (c *client) ask(line string, wait time.Duration) (string, error) {
	c.t.Helper()
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	_ = c.c.SetReadDeadline(time.Now().Add(wait))
	s, err := c.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

func TestForward(t *testing.T) {
	p := startProxy(t)
	c := dial(t, p)
	for _, line := range []string{"one", "two", strings.Repeat("x", 100_000)} {
		if got, err := c.ask(line, 5*time.Second); got != line || err != nil {
			t.Fatalf("ask(%.10q) = %.10q, %v", line, got, err)
		}
	}
	if s := p.Stats(); s.Accepted != 1 || s.Dropped != 0 || s.Cut != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestDropReplies checks that replies are swallowed while dropping, that a
// connection which lost a reply stays silent afterwards, and that a new
// connection is served normally.
func TestDropReplies(t *testing.T) {
	p := startProxy(t)
	c := dial(t, p)
	if got, err := c.ask("before", 5*time.Second); got != "before" || err != nil {
		t.Fatalf("ask before = %q, %v", got, err)
	}
	p.DropReplies(true)
	if got, err := c.ask("during", 50*time.Millisecond); !isTimeout(err) {
		t.Fatalf("ask while dropping = %q, %v; want a timeout", got, err)
	}
	// The timeout alone does not prove the echo was swallowed yet, rather
	// than slow on a loaded machine.
	for deadline := time.Now().Add(5 * time.Second); p.Stats().Dropped == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no reply swallowed in 5 s")
		}
		runtime.Gosched()
	}
	p.DropReplies(false)
	// The echo of "during" was lost: handing out "after" now would pair it
	// with the wrong request.
	if got, err := c.ask("after", 50*time.Millisecond); !isTimeout(err) {
		t.Fatalf("ask on a connection that lost a reply = %q, %v; want a timeout", got, err)
	}
	if got, err := dial(t, p).ask("fresh", 5*time.Second); got != "fresh" || err != nil {
		t.Fatalf("ask on a new connection = %q, %v", got, err)
	}
	if s := p.Stats(); s.Silenced != 1 {
		t.Errorf("stats %+v: want 1 connection silenced", s)
	}
	if n := p.Cut(); n != 2 {
		t.Errorf("Cut = %d, want 2", n)
	}
	if _, err := c.ask("cut", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("ask on a cut connection: %v; want it closed", err)
	}
}

func TestLatency(t *testing.T) {
	p := startProxy(t)
	c := dial(t, p)
	const d = 30 * time.Millisecond
	p.SetLatency(d)
	start := time.Now()
	if got, err := c.ask("slow", 5*time.Second); got != "slow" || err != nil {
		t.Fatalf("ask = %q, %v", got, err)
	}
	if took := time.Since(start); took < 2*d {
		t.Fatalf("a round trip took %v with %v each way", took, d)
	}
	p.SetLatency(0)
	if got, err := c.ask("fast", 5*time.Second); got != "fast" || err != nil {
		t.Fatalf("ask = %q, %v", got, err)
	}
}

// TestLoss checks that a lost chunk drops its connection, not silently some
// bytes of it, that the share of failed round trips follows the loss rate
// (each round trip is two chunks), and that SetLoss(0) ends the losses.
func TestLoss(t *testing.T) {
	p := startProxy(t)
	p.SetLoss(1)
	c := dial(t, p)
	if got, err := c.ask("lost", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("ask with every chunk lost = %q, %v; want the connection dropped", got, err)
	}

	p.SetLoss(0.3)
	const rounds = 400
	failed := 0
	for i := range rounds {
		c := dial(t, p)
		line := strings.Repeat("y", i%50+1)
		got, err := c.ask(line, 5*time.Second)
		switch {
		case err == nil && got == line:
		case err != nil && !isTimeout(err):
			failed++
		default:
			t.Fatalf("round %d: ask = %q, %v; want the line or a dropped connection", i, got, err)
		}
		_ = c.c.Close()
	}
	// 1 - 0.7² = 51% of round trips fail; 400 of them put the share within
	// ±10% but for one run in several thousand.
	if share := float64(failed) / rounds; share < 0.41 || share > 0.61 {
		t.Errorf("%d of %d round trips failed at a 30%% loss; want about 51%%", failed, rounds)
	}
	if lost := p.Stats().Lost; lost < failed {
		t.Errorf("Stats.Lost = %d, fewer than the %d failed round trips", lost, failed)
	}

	p.SetLoss(0)
	if got, err := dial(t, p).ask("kept", 5*time.Second); got != "kept" || err != nil {
		t.Fatalf("ask after SetLoss(0) = %q, %v", got, err)
	}
}

// TestClose checks that Close cuts the connections, refuses new ones and
// leaves no goroutine behind.
func TestClose(t *testing.T) {
	before := runtime.NumGoroutine()
	addr := echoServer(t)
	p, err := Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	if _, err := c.ask("x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.SetLatency(time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.ask("y", 5*time.Second); err == nil {
		t.Fatal("a connection survived Close")
	}
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		_ = c.Close()
		t.Fatal("Dial after Close succeeded")
	}
	// The echo server's goroutines are the test's; the proxy's are gone once
	// Close returned. Allow the echo server its accept loop and one copier.
	if n := runtime.NumGoroutine(); n > before+2 {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}
