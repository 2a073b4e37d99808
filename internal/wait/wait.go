// Package wait holds the one sleep that every retry loop of the module uses.
package wait

import (
	"context"
	"time"
)

// Sleep sleeps for d or until ctx is done, and then returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
