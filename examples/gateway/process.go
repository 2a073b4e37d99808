package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// How long a gateway process may take to start listening, and to stop.
const (
	processStartTimeout = 30 * time.Second
	processStopTimeout  = 30 * time.Second
)

// hello is the first line a gateway process prints: where it listens.
type hello struct {
	PID     int    `json:"pid"`
	Addr    string `json:"addr"`
	Backend string `json:"backend"`
}

// serve runs one gateway until stdin is closed (or ctx is done), then prints
// what it did as a JSON [summary] and returns. It is the -serve mode, which
// the -instances mode runs in child processes; run by hand it prints its
// address, serves until Ctrl-D or Ctrl-C, and prints its summary.
func serve(ctx context.Context, cfg config, stdin io.Reader, stdout io.Writer) error {
	spec, err := parseStore(cfg.Store)
	if err != nil {
		return err
	}
	g, err := startGateway(ctx, gatewayConfig{
		store:          spec,
		fallback:       cfg.fallbackSpec(),
		addr:           cfg.Addr,
		seed:           cfg.Seed,
		failRate:       cfg.FailRate,
		inFlightStatus: cfg.InFlightStatus,
		logger:         cfg.logger(),
	})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(hello{PID: os.Getpid(), Addr: g.addr, Backend: g.store.Backend()}); err != nil {
		_, _ = g.stop(ctx)
		return err
	}
	// The reader goroutine ends when stdin is closed, which the parent does to
	// stop this gateway; if ctx ends first, the process exits right after.
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), processStopTimeout)
	defer cancel()
	sum, err := g.stop(sctx)
	sum.PID = os.Getpid()
	return errors.Join(err, enc.Encode(sum))
}

// process is a gateway running in a child process of this program (the
// -serve mode of the same executable). It is killed when the context it was
// started with ends; it also stops by itself when this process dies, because
// its stdin is then closed.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	dec   *json.Decoder
	hello hello

	stopOnce sync.Once
	sum      summary
	err      error
}

// startProcess starts a gateway process with the store, seed and settings of
// cfg, and waits until it listens.
func startProcess(ctx context.Context, cfg config, seed uint64) (*process, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-serve", "-addr", "127.0.0.1:0", "-store", cfg.Store,
		"-seed", strconv.FormatUint(seed, 10),
		"-fail", strconv.FormatFloat(cfg.FailRate, 'g', -1, 64),
		"-inflight-status", strconv.Itoa(cfg.InFlightStatus)}
	if cfg.Verbose {
		args = append(args, "-v")
	}
	if cfg.Fallback != "" {
		args = append(args, "-fallback", cfg.Fallback)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = cfg.stderr()
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start gateway process: %w", err)
	}
	p := &process{cmd: cmd, stdin: stdin, dec: json.NewDecoder(stdout)}
	if err := p.read(ctx, &p.hello, processStartTimeout); err != nil {
		_ = cmd.Process.Kill()
		werr := cmd.Wait()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("gateway process %d exited before listening (%v); its error is above", cmd.Process.Pid, werr)
		}
		return nil, fmt.Errorf("gateway process %d did not start: %w (%v)", cmd.Process.Pid, err, werr)
	}
	return p, nil
}

// read decodes the next JSON value the process prints into v, waiting at most
// timeout. On a timeout the caller kills the process, which ends the reading
// goroutine.
func (p *process) read(ctx context.Context, v any, timeout time.Duration) error {
	type result struct {
		raw json.RawMessage
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = p.dec.Decode(&r.raw)
		done <- r
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			return r.err
		}
		return json.Unmarshal(r.raw, v)
	case <-t.C:
		return fmt.Errorf("no answer within %v", timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// URL returns the webhook URL of the process's gateway.
func (p *process) URL() string { return "http://" + p.hello.Addr + "/telegram" }

// stop closes the process's stdin, reads its summary and waits for it to exit.
// A process that does not answer in time is killed.
func (p *process) stop(ctx context.Context) (summary, error) {
	p.stopOnce.Do(func() {
		p.err = p.stdin.Close()
		if err := p.read(ctx, &p.sum, processStopTimeout); err != nil {
			_ = p.cmd.Process.Kill()
			p.err = errors.Join(p.err, fmt.Errorf("gateway process %d: no summary: %w", p.hello.PID, err))
		}
		if err := p.cmd.Wait(); err != nil {
			p.err = errors.Join(p.err, fmt.Errorf("gateway process %d: %w", p.hello.PID, err))
		}
	})
	return p.sum, p.err
}
