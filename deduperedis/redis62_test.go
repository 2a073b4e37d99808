package deduperedis_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// redis62 is a RESP proxy in front of a real Redis server that answers the
// forms of commands that Redis 7.0 added as Redis 6.2 answers them, and
// forwards every other command. The command reference's histories: SET
// "Starting with Redis version 7.0.0: Allowed the NX and GET options to be
// used together" (6.2 parses them as exclusive and answers "ERR syntax
// error"); EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT "Starting with Redis version
// 7.0.0: Added options: NX, XX, GT and LT" (6.2's arity check answers "ERR
// wrong number of arguments for 'pexpire' command"); and CLIENT SETINFO,
// which go-redis sends on connecting, is 7.2's (6.2 answers its unknown
// subcommand text; go-redis ignores it). No Redis 6.2 binary is at hand.
// Scripts run on the server behind: that the layout's scripts use only what
// 6.2 has is for their review, not this proxy, to check.
type redis62 struct {
	ln      net.Listener
	target  string
	wg      sync.WaitGroup
	refused atomic.Int64 // commands answered as 6.2 refuses them

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// startRedis62 starts a redis62 in front of target on a free loopback port;
// it is closed at the end of the test.
func startRedis62(t testing.TB, target string) *redis62 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &redis62{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr is the address clients dial.
func (p *redis62) Addr() string { return p.ln.Addr().String() }

func (p *redis62) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() {
			p.serve(c, s)
			_ = c.Close()
			_ = s.Close()
		})
	}
}

// close stops the listener, cuts every connection and waits for their
// goroutines.
func (p *redis62) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// serve answers the commands read from client, one at a time, in order:
// refused ones itself, the others by forwarding each to server and relaying
// its one reply.
func (p *redis62) serve(client, server net.Conn) {
	cr, sr, cw := bufio.NewReader(client), bufio.NewReader(server), bufio.NewWriter(client)
	var reply bytes.Buffer
	for {
		args, raw, err := readCommand(cr)
		if err != nil {
			return
		}
		if refusal := refusedBy62(args); refusal != "" {
			p.refused.Add(1)
			_, _ = cw.WriteString("-" + refusal + "\r\n")
		} else {
			reply.Reset()
			if _, err := server.Write(raw); err != nil {
				return
			}
			if err := readValue(sr, &reply); err != nil {
				return
			}
			_, _ = cw.Write(reply.Bytes())
		}
		if cr.Buffered() == 0 {
			if cw.Flush() != nil {
				return
			}
		}
	}
}

// refusedBy62 returns the error Redis 6.2 answers args with, without its
// "-", or "" if 6.2 runs it as 7.0 does.
func refusedBy62(args []string) string {
	if len(args) == 0 {
		return ""
	}
	name := strings.ToLower(args[0])
	switch name {
	case "set":
		var nx, get bool
		for _, a := range args[3:] {
			nx = nx || strings.EqualFold(a, "nx")
			get = get || strings.EqualFold(a, "get")
		}
		if nx && get {
			return "ERR syntax error"
		}
	case "expire", "pexpire", "expireat", "pexpireat":
		if len(args) != 3 {
			return "ERR wrong number of arguments for '" + name + "' command"
		}
	case "client":
		if len(args) > 1 && strings.EqualFold(args[1], "setinfo") {
			return "ERR Unknown subcommand or wrong number of arguments for '" + args[1] + "'. Try CLIENT HELP."
		}
	}
	return ""
}

// readCommand reads one command, an array of bulk strings, from r: its
// arguments and its bytes as read.
func readCommand(r *bufio.Reader) (args []string, raw []byte, err error) {
	var buf bytes.Buffer
	line, err := readLine(r, &buf)
	if err != nil {
		return nil, nil, err
	}
	if line[0] != '*' {
		return nil, nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil {
		return nil, nil, err
	}
	for range n {
		head, err := readLine(r, &buf)
		if err != nil {
			return nil, nil, err
		}
		size, err := strconv.Atoi(head[1:])
		if head[0] != '$' || err != nil {
			return nil, nil, fmt.Errorf("not a bulk string: %q", head)
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, nil, err
		}
		buf.Write(b)
		args = append(args, string(b[:size]))
	}
	return args, buf.Bytes(), nil
}

// readValue reads one RESP2 or RESP3 value from r into buf, as read.
func readValue(r *bufio.Reader, buf *bytes.Buffer) error {
	line, err := readLine(r, buf)
	if err != nil {
		return err
	}
	n := 0
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return nil
	case '$', '=', '!', '*', '~', '>', '%', '|':
		if n, err = strconv.Atoi(line[1:]); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown reply %q", line)
	}
	switch line[0] {
	case '$', '=', '!':
		if n < 0 {
			return nil
		}
		_, err := io.CopyN(buf, r, int64(n)+2)
		return err
	case '%', '|':
		n *= 2
	}
	for range n {
		if err := readValue(r, buf); err != nil {
			return err
		}
	}
	if line[0] == '|' { // attributes come before the reply they describe
		return readValue(r, buf)
	}
	return nil
}

// readLine reads a line ending in CRLF into buf and returns it without the
// CRLF.
func readLine(r *bufio.Reader, buf *bytes.Buffer) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	buf.WriteString(line)
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty line")
	}
	return line, nil
}

// TestRedis62Proxy checks that the proxy answers as Redis 6.2 does: the 7.0
// forms refused with 6.2's texts, everything else forwarded.
func TestRedis62Proxy(t *testing.T) {
	p := startRedis62(t, redisAddr(t))
	c := newClient(t, p.Addr(), nil)
	ctx := context.Background()
	k := "dedupe-test-62:" + randomID(t)
	t.Cleanup(func() { c.Del(ctx, k) })
	err := c.Do(ctx, "set", k, "v", "px", 1000, "nx", "get").Err()
	assert.EqualError(t, err, "ERR syntax error")
	err = c.Do(ctx, "pexpire", k, 1000, "gt").Err()
	assert.EqualError(t, err, "ERR wrong number of arguments for 'pexpire' command")
	require.NoError(t, c.Set(ctx, k, "v", time.Minute).Err())
	v, err := c.Get(ctx, k).Result()
	require.NoError(t, err)
	assert.Equal(t, "v", v)
	h, err := c.HGetAll(ctx, k+"h").Result() // a RESP3 map
	require.NoError(t, err)
	assert.Empty(t, h)
}

// TestCompact62Conformance runs the conformance suite on the compact layout
// through a proxy that answers as Redis 6.2 does: the store must find out
// by itself, from the server's refusals, that it must run its scripts.
func TestCompact62Conformance(t *testing.T) {
	t.Parallel()
	p := startRedis62(t, redisAddr(t))
	runConformance(t, newClient(t, p.Addr(), nil), deduperedis.Config{Compact: true})
	assert.Positive(t, p.refused.Load(), "commands refused as by 6.2")
}

// TestCompact62Workload has two gateways on one prefix, on the compact
// layout through a proxy that answers as Redis 6.2 does, take 400 messages,
// each delivered to both: every Claim and Mark must succeed, and each
// message must run exactly once.
func TestCompact62Workload(t *testing.T) {
	p := startRedis62(t, redisAddr(t))
	prefix := "dedupe-test-credis:" + randomID(t) + ":"
	stores := make([]*deduperedis.Store, 2)
	for i := range stores {
		stores[i] = newStore(t, newClient(t, p.Addr(), nil), deduperedis.Config{Prefix: prefix, Compact: true, Shards: 64})
	}
	ctx := context.Background()
	t.Cleanup(func() {
		c := newClient(t, redisAddr(t), nil)
		c.Del(ctx, keysUnder(t, c, prefix)...)
	})
	const messages = 400
	var calls, failed atomic.Int64
	ran := make([]atomic.Int32, messages)
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Go(func() {
			for i := range messages {
				k := dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(i)}
				for attempt := 0; attempt < 100; attempt++ {
					calls.Add(1)
					st, err := s.Claim(ctx, dedupe.NewClaim(k), time.Minute)
					if err != nil {
						failed.Add(1)
						break
					}
					if st == dedupe.Claimed {
						ran[i].Add(1)
						calls.Add(1)
						if err := s.Mark(ctx, k, time.Hour); err != nil {
							failed.Add(1)
						}
					}
					if st != dedupe.InFlight {
						break
					}
					time.Sleep(time.Millisecond) // the other gateway is between its Claim and its Mark
				}
			}
		})
	}
	wg.Wait()
	var once, never, twice int
	for i := range ran {
		switch ran[i].Load() {
		case 0:
			never++
		case 1:
			once++
		default:
			twice++
		}
	}
	t.Logf("calls %d, failed %d; messages run once %d, never %d, more than once %d", calls.Load(), failed.Load(), once, never, twice)
	assert.Zero(t, failed.Load(), "calls failed of %d", calls.Load())
	assert.Equal(t, messages, once, "messages run exactly once (never %d, more than once %d)", never, twice)
	assert.Positive(t, p.refused.Load(), "commands refused as by 6.2")
}
