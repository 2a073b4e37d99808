package faultproxy

import (
	"bufio"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// closedLine is what lineServer sends when a connection ends.
const closedLine = "<closed>"

// lineServer sends on lines each line it reads, and closedLine when a
// connection ends, until the test ends.
func lineServer(t *testing.T) (addr string, lines <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ch := make(chan string, 16)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				r := bufio.NewScanner(c)
				for r.Scan() {
					ch <- r.Text()
				}
				ch <- closedLine
			})
		}
	})
	return ln.Addr().String(), ch
}

// next returns the next line lineServer sent, or fails t after 10 s.
func next(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case line := <-lines:
		return line
	case <-time.After(10 * time.Second):
		require.Fail(t, "the server read nothing more in 10 s")
		return ""
	}
}

// TestCutClients checks that CutClients fails the client's connection at
// once, while the bytes the proxy had read from it still reach the server
// when they are due, and that the link is then closed.
func TestCutClients(t *testing.T) {
	addr, lines := lineServer(t)
	p, err := Start(addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	const latency = 300 * time.Millisecond
	p.SetLatency(latency)
	_, err = c.Write([]byte("late\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.Stats().Requested == 5 }, 5*time.Second, time.Millisecond,
		"the proxy never read the request")
	sent := time.Now()
	require.Equal(t, 1, p.CutClients())
	require.Equal(t, 0, p.CutClients(), "a link is cut once")

	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err, "the client's side is still open")
	require.False(t, isTimeout(err), "the client's side was not closed: %v", err)

	require.Equal(t, "late", next(t, lines), "the request read before the cut never reached the server")
	require.GreaterOrEqual(t, time.Since(sent), latency/2, "the request reached the server before it was due")
	require.Equal(t, closedLine, next(t, lines), "the server's side stays open after the request was sent")
	require.Equal(t, 1, p.Stats().Cut)
}
