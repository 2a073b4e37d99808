package deduperedis

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMs(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{time.Nanosecond, 1},
		{time.Millisecond, 1},
		{time.Millisecond + 1, 2},
		{1500 * time.Microsecond, 2},
		{24 * time.Hour, 86_400_000},
		{time.Duration(1<<63 - 1), (1<<63-1)/1_000_000 + 1},
	} {
		assert.Equal(t, tc.want, ms(tc.d), "ms(%v)", tc.d)
	}
}

// TestRetryable checks which errors a call on Redis Cluster is sent again
// after: those a failover or a slot migration explains, never a context's
// end, a closed store, an unconfirmed write or a reply of the command itself.
func TestRetryable(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		want bool
	}{
		{live, refused, true},
		{live, fmt.Errorf("dedupe: redis: claim x: %w", refused), true},
		{live, io.EOF, true},
		{live, syscall.ECONNRESET, true},
		{live, redis.ErrClosed, true},
		{live, redis.ErrPoolTimeout, true},
		{live, reply(t, "CLUSTERDOWN The cluster is down"), true},
		{live, reply(t, "TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{live, reply(t, "MOVED 3999 127.0.0.1:6381"), true},
		{live, reply(t, "ASK 3999 127.0.0.1:6381"), true},
		{live, reply(t, "LOADING Redis is loading the dataset in memory"), true},
		{live, reply(t, "READONLY You can't write against a read only replica."), true},
		{live, reply(t, "MASTERDOWN Link with MASTER is down"), true},
		{ended, refused, false},
		{live, context.DeadlineExceeded, true}, // a dial's own timeout (DialTimeout): the caller's context has not ended
		{live, context.Canceled, false},
		{live, dedupe.ErrClosed, false},
		{live, fmt.Errorf("%w: 0 of 1 replicas", ErrNotReplicated), false},
		{live, reply(t, "NOREPLICAS Not enough good replicas to write."), false},
		{live, reply(t, "ERR wrong number of arguments"), false},
		{live, redis.Nil, false},
	} {
		assert.Equal(t, tc.want, retryable(tc.ctx, tc.err), "retryable(ctx ended %v, %v)", tc.ctx.Err() != nil, tc.err)
	}
}

// reply returns the error go-redis makes of the error reply line, read from a
// server that answers every command with it: the same typed error a Redis
// node's reply gives.
func reply(t *testing.T, line string) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		for {
			var n int
			if _, err := fmt.Fscanf(r, "*%d\r\n", &n); err != nil {
				return
			}
			for range n {
				var size int
				if _, err := fmt.Fscanf(r, "$%d\r\n", &size); err != nil {
					return
				}
				if _, err := r.Discard(size + 2); err != nil {
					return
				}
			}
			if _, err := io.WriteString(conn, "-"+line+"\r\n"); err != nil {
				return
			}
		}
	}()
	c := redis.NewClient(&redis.Options{Addr: l.Addr().String(), Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	defer c.Close()
	err = c.Get(context.Background(), "k").Err()
	require.EqualError(t, err, line, "reply %q", line)
	return err
}

// parseMemory reads the fields it needs from INFO memory, whatever the
// others, and fails when one is missing or not a number.
func TestParseMemory(t *testing.T) {
	info := "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nused_memory_startup:862000\r\n" +
		"maxmemory:33554432\r\nmaxmemory_human:32.00M\r\nmaxmemory_policy:volatile-ttl\r\n"
	m, err := parseMemory(info)
	require.NoError(t, err)
	assert.Equal(t, ServerMemory{Used: 1048576, Startup: 862000, Max: 33554432, Policy: "volatile-ttl"}, m)
	for _, bad := range []string{
		"# Memory\r\nused_memory:1\r\nmaxmemory:0\r\n",                          // no used_memory_startup
		"# Memory\r\nused_memory:x\r\nused_memory_startup:1\r\nmaxmemory:0\r\n", // not a number
		"",
	} {
		_, err := parseMemory(bad)
		assert.Error(t, err, "%q", bad)
	}
}
