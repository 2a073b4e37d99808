package deduperedis

import (
	"testing"
	"time"
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
		if got := ms(tc.d); got != tc.want {
			t.Errorf("ms(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}
