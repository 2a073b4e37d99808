package batch

import "sync"

// InOrder calls do(i) for every i in [0, n), up to width calls at once, in
// waves: the first item of each key (key(i)), then the second, and so on,
// so that the items on one key are done one after another, in order, and
// the others concurrently. It returns when every call has returned. It is how
// a store that answers one key per call serves a batch of calls (the per-key
// fallback of dedupe's batches, and the traced store of dedupeotel).
func InOrder[K comparable](n int, key func(i int) K, width int, do func(i int)) {
	if n == 1 {
		do(0)
		return
	}
	seen := make(map[K]int, n)
	var waves [][]int
	for i := range n {
		w := seen[key(i)]
		seen[key(i)] = w + 1
		if w == len(waves) {
			waves = append(waves, nil)
		}
		waves[w] = append(waves[w], i)
	}
	sem := make(chan struct{}, max(width, 1))
	for _, wave := range waves {
		var wg sync.WaitGroup
		for _, i := range wave {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				do(i)
			})
		}
		wg.Wait()
	}
}
