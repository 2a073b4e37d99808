package batch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// errStoreClosed stands for a store's own "closed" error, which the batcher
// is given and returns.
var errStoreClosed = errors.New("store closed")

// server is a fake round trip: it records the batches it is sent and holds
// each until release is closed.
type server struct {
	mu      sync.Mutex
	batches [][]string
	entered chan struct{} // one value per round trip begun
	release chan struct{}
}

func newBatcher(rounds int) (*Batcher[*[]string], *server) {
	s := &server{entered: make(chan struct{}, 100), release: make(chan struct{})}
	b := &Batcher[*[]string]{Rounds: rounds, Closed: errStoreClosed}
	b.Send = func(r *Round, calls []*Call[*[]string]) {
		var req []string
		reads := make([]func() error, len(calls))
		for i, c := range calls {
			reads[i] = c.Queue(&req)
		}
		s.mu.Lock()
		s.batches = append(s.batches, req)
		s.mu.Unlock()
		s.entered <- struct{}{}
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
		for i, c := range calls {
			c.Answer(reads[i]())
		}
	}
	return b, s
}

// op queues key into the request and reads back nil.
func op(key string) func(*[]string) func() error {
	return func(req *[]string) func() error {
		*req = append(*req, key)
		return func() error { return nil }
	}
}

// TestLoneCallerInline checks that a call finding a free round trip is sent
// at once, alone, and that the calls arriving while it is in flight go
// together in the next round trip.
func TestLoneCallerInline(t *testing.T) {
	b, s := newBatcher(1)
	defer b.Close()
	ctx := context.Background()
	first := make(chan error)
	go func() { first <- b.Do(ctx, "a", op("a")) }()
	<-s.entered
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, k := range []string{"b", "c", "d"} {
		wg.Go(func() { errs[i] = b.Do(ctx, k, op(k)) })
	}
	for b.Queued() < 3 {
		time.Sleep(time.Millisecond)
	}
	close(s.release)
	require.NoError(t, <-first)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, s.batches, 2, "want [a] then the three others together")
	require.Len(t, s.batches[0], 1, "batches %v; want [a] then the three others together", s.batches)
	require.Len(t, s.batches[1], 3, "batches %v; want [a] then the three others together", s.batches)
}

// TestAbandonedWhileQueued checks that a call whose context ends while it is
// queued returns at once and is never sent, and that Close answers the calls
// still queued with the error it was given for that.
func TestAbandonedWhileQueued(t *testing.T) {
	b, s := newBatcher(1)
	go func() { _ = b.Do(context.Background(), "a", op("a")) }()
	<-s.entered
	ctx, cancel := context.WithCancel(context.Background())
	abandoned := make(chan error)
	go func() { abandoned <- b.Do(ctx, "x", op("x")) }()
	closed := make(chan error)
	go func() { closed <- b.Do(context.Background(), "y", op("y")) }()
	for b.Queued() < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	require.ErrorIs(t, <-abandoned, context.Canceled, "abandoned call")
	done := make(chan struct{})
	go func() { b.Close(); close(done) }()
	require.ErrorIs(t, <-closed, errStoreClosed, "queued call at Close")
	close(s.release)
	<-done
	require.ErrorIs(t, b.Do(context.Background(), "z", op("z")), errStoreClosed, "call after Close")
	for _, batch := range s.batches {
		for _, k := range batch {
			require.Equal(t, "a", k, "batches %v: only a was to be sent", s.batches)
		}
	}
}

// TestClosedDefault checks that a batcher given no Closed error still refuses
// calls after Close, with an error of its own.
func TestClosedDefault(t *testing.T) {
	b, _ := newBatcher(1)
	b.Closed = nil
	b.Close()
	require.ErrorIs(t, b.Do(context.Background(), "a", op("a")), errClosed, "call after Close")
}

// TestInOrder does the items of one key one after another, in order, and
// the others at once: the first wave's three items wait for each other.
func TestInOrder(t *testing.T) {
	keys := []string{"a", "b", "a", "c", "a", "b"}
	var mu sync.Mutex
	var done []int
	var firstWave sync.WaitGroup
	firstWave.Add(3)
	var together atomic.Bool
	InOrder(len(keys), func(i int) string { return keys[i] }, 8, func(i int) {
		if i == 0 || i == 1 || i == 3 {
			firstWave.Done()
			waited := make(chan struct{})
			go func() { firstWave.Wait(); close(waited) }()
			select {
			case <-waited:
				together.Store(true)
			case <-time.After(10 * time.Second):
			}
		}
		mu.Lock()
		done = append(done, i)
		mu.Unlock()
	})
	pos := make(map[int]int)
	for p, i := range done {
		pos[i] = p
	}
	require.Len(t, done, len(keys))
	require.True(t, together.Load(), "the first items of a, b and c ran at once")
	require.Less(t, pos[0], pos[2], "a's first item before its second")
	require.Less(t, pos[2], pos[4], "a's second item before its third")
	require.Less(t, pos[1], pos[5], "b's items in order")
}
