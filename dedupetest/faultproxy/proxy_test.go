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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoServer answers each line it reads with the same line, until the test
// ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
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
	require.NoError(t, err)
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
	require.NoError(t, err)
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
		got, err := c.ask(line, 5*time.Second)
		require.NoError(t, err, "ask(%.10q)", line)
		// Not Equal: its diff would print the whole 100,000-byte line.
		require.True(t, got == line, "ask(%.10q) = %.10q", line, got)
	}
	s := p.Stats()
	assert.Equal(t, 1, s.Accepted, "stats %+v", s)
	assert.Zero(t, s.Dropped, "stats %+v", s)
	assert.Zero(t, s.Cut, "stats %+v", s)
}

// TestDropReplies checks that replies are swallowed while dropping, that a
// connection which lost a reply stays silent afterwards, and that a new
// connection is served normally.
func TestDropReplies(t *testing.T) {
	p := startProxy(t)
	c := dial(t, p)
	got, err := c.ask("before", 5*time.Second)
	require.NoError(t, err, "ask before")
	require.Equal(t, "before", got, "ask before")
	p.DropReplies(true)
	got, err = c.ask("during", 50*time.Millisecond)
	require.True(t, isTimeout(err), "ask while dropping = %q, %v; want a timeout", got, err)
	// The timeout alone does not prove the echo was swallowed yet, rather
	// than slow on a loaded machine.
	for deadline := time.Now().Add(5 * time.Second); p.Stats().Dropped == 0; {
		require.False(t, time.Now().After(deadline), "no reply swallowed in 5 s")
		runtime.Gosched()
	}
	p.DropReplies(false)
	// The echo of "during" was lost: handing out "after" now would pair it
	// with the wrong request.
	got, err = c.ask("after", 50*time.Millisecond)
	require.True(t, isTimeout(err), "ask on a connection that lost a reply = %q, %v; want a timeout", got, err)
	got, err = dial(t, p).ask("fresh", 5*time.Second)
	require.NoError(t, err, "ask on a new connection")
	require.Equal(t, "fresh", got, "ask on a new connection")
	s := p.Stats()
	assert.Equal(t, 1, s.Silenced, "stats %+v: want 1 connection silenced", s)
	assert.Equal(t, 2, p.Cut(), "Cut")
	_, err = c.ask("cut", 5*time.Second)
	require.Error(t, err, "ask on a cut connection; want it closed")
	require.False(t, isTimeout(err), "ask on a cut connection: %v; want it closed", err)
}

func TestLatency(t *testing.T) {
	p := startProxy(t)
	c := dial(t, p)
	const d = 30 * time.Millisecond
	p.SetLatency(d)
	start := time.Now()
	got, err := c.ask("slow", 5*time.Second)
	require.NoError(t, err, "ask")
	require.Equal(t, "slow", got, "ask")
	require.GreaterOrEqual(t, time.Since(start), 2*d, "a round trip, with %v each way", d)
	p.SetLatency(0)
	got, err = c.ask("fast", 5*time.Second)
	require.NoError(t, err, "ask")
	require.Equal(t, "fast", got, "ask")
}

// TestLoss checks that a lost chunk drops its connection, not silently some
// bytes of it, that the share of failed round trips follows the loss rate
// (each round trip is two chunks), and that SetLoss(0) ends the losses.
func TestLoss(t *testing.T) {
	p := startProxy(t)
	p.SetLoss(1)
	c := dial(t, p)
	got, err := c.ask("lost", 5*time.Second)
	require.Error(t, err, "ask with every chunk lost = %q; want the connection dropped", got)
	require.False(t, isTimeout(err), "ask with every chunk lost = %q, %v; want the connection dropped", got, err)

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
			require.Failf(t, "neither the line nor a dropped connection", "round %d: ask = %q, %v; want the line or a dropped connection", i, got, err)
		}
		_ = c.c.Close()
	}
	// 1 - 0.7² = 51% of round trips fail; 400 of them put the share within
	// ±10% but for one run in several thousand.
	share := float64(failed) / rounds
	assert.GreaterOrEqual(t, share, 0.41, "%d of %d round trips failed at a 30%% loss; want about 51%%", failed, rounds)
	assert.LessOrEqual(t, share, 0.61, "%d of %d round trips failed at a 30%% loss; want about 51%%", failed, rounds)
	assert.GreaterOrEqual(t, p.Stats().Lost, failed, "Stats.Lost, against the failed round trips")

	p.SetLoss(0)
	got, err = dial(t, p).ask("kept", 5*time.Second)
	require.NoError(t, err, "ask after SetLoss(0)")
	require.Equal(t, "kept", got, "ask after SetLoss(0)")
}

// TestClose checks that Close cuts the connections, refuses new ones and
// leaves no goroutine behind.
func TestClose(t *testing.T) {
	before := runtime.NumGoroutine()
	addr := echoServer(t)
	p, err := Start(addr)
	require.NoError(t, err)
	c := dial(t, p)
	_, err = c.ask("x", 5*time.Second)
	require.NoError(t, err)
	p.SetLatency(time.Millisecond)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "second Close")
	_, err = c.ask("y", 5*time.Second)
	require.Error(t, err, "a connection survived Close")
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		_ = c.Close()
		require.Fail(t, "Dial after Close succeeded")
	}
	// The echo server's goroutines are the test's; the proxy's are gone once
	// Close returned. Allow the echo server its accept loop and one copier.
	if n := runtime.NumGoroutine(); n > before+2 {
		buf := make([]byte, 1<<16)
		require.Failf(t, "goroutines left after Close", "%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}
