package postgres

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// The walk and the bulk writes of package migrate: MarkUntil writes marks
// with their own expiries (never shortening a live mark, replacing a claim,
// leaving a released key's fences to be replaced), ListMarks walks them in
// key order, pages resumed from the last key, with expired rows and no
// claims, CountLive counts, and all of it on a table with a column of its
// own that the store does not know.
func TestListMarksAndMarkUntil(t *testing.T) {
	t.Parallel()
	table := testTable(t)
	conn := adminConn(t)
	if _, err := conn.Exec(context.Background(), `CREATE TABLE `+table+` (note text DEFAULT 'x', key text COLLATE "C" PRIMARY KEY, token text, expires_at timestamptz NOT NULL, result bytea)`); err != nil {
		t.Fatal(err)
	}
	checkListMarks(t, newTestStore(t, newPool(t, "", 0), Config{Table: table}), table, 1)
}

// The same on the partitioned layout, whose table has no unique key and
// whose partitions MarkUntil creates as the expiries need them.
func TestListMarksAndMarkUntilPartitioned(t *testing.T) {
	t.Parallel()
	table := testTable(t)
	s := newTestStore(t, newPool(t, "", 0), Config{Table: table, Partitioned: true, PartitionSpan: time.Hour})
	checkListMarks(t, s, table, 3)
	checkOneRowPerKey(t, table)
}

// checkListMarks runs the test of ListMarks and MarkUntil on s, whose table
// has at least minSizes sizes to report.
func checkListMarks(t *testing.T, s *Store, table string, minSizes int) {
	ctx := context.Background()
	const n = 1200
	keys := make([]dedupe.Key, n)
	exps := make([]time.Time, n)
	for i := range keys {
		keys[i] = dedupe.Key{Channel: "qq", MessageID: fmt.Sprintf("%05d", i)}
		exps[i] = time.Now().Add(time.Hour + time.Duration(i)*time.Second)
	}
	claim := dedupe.NewClaim(keys[0])
	if _, err := s.Claim(ctx, claim, time.Hour); err != nil {
		t.Fatal(err)
	}
	if present, err := s.MarkUntil(ctx, keys[1:], exps[1:]); err != nil || present != 0 {
		t.Fatalf("MarkUntil: %d present, %v", present, err)
	}
	if err := s.Mark(ctx, dedupe.Key{Channel: "aa", MessageID: "expired"}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The claim is listed by neither; CountLive sees it.
	marks, claims, oldest, newest, err := s.CountLive(ctx)
	if err != nil || marks < n-2 || marks > n-1 || claims != 1 {
		t.Fatalf("CountLive: %d marks, %d claims, %v", marks, claims, err)
	}
	if math.Abs(oldest.Sub(exps[1]).Seconds()) > 0.5 || math.Abs(newest.Sub(exps[n-1]).Seconds()) > 0.5 {
		t.Fatalf("CountLive: oldest %v newest %v, want %v and %v", oldest, newest, exps[1], exps[n-1])
	}
	// Over the claim and every mark again, one shorter: all present but the claimed key.
	short := append([]time.Time(nil), exps...)
	short[1] = time.Now().Add(time.Minute)
	if present, err := s.MarkUntil(ctx, keys, short); err != nil || present != n-1 {
		t.Fatalf("MarkUntil again: %d present, %v", present, err)
	}
	var last string
	listed := 0
	cursor := ""
	for {
		next, err := s.ListMarks(ctx, cursor, 97, func(k dedupe.Key, exp time.Time) {
			listed++
			if k.String() <= last {
				t.Fatalf("%s after %s: not in key order", k, last)
			}
			last = k.String()
			if k.Channel == "aa" {
				if exp.After(time.Now()) {
					t.Errorf("the expired mark is listed with expiry %v", exp)
				}
				return
			}
			i, _ := strconv.Atoi(k.MessageID)
			if d := exp.Sub(exps[i]); math.Abs(d.Seconds()) > 0.5 {
				t.Errorf("%s: expiry off by %v", k, d)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if listed != n+1 {
		t.Fatalf("listed %d marks, want %d", listed, n+1)
	}
	// A live mark keeps its result when a copy lengthens it.
	rk := dedupe.Key{Channel: "qq", MessageID: "with-result"}
	if err := s.MarkResult(ctx, rk, []byte("reply"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if present, err := s.MarkUntil(ctx, []dedupe.Key{rk}, []time.Time{time.Now().Add(time.Hour)}); err != nil || present != 1 {
		t.Fatalf("MarkUntil over a mark with a result: %d present, %v", present, err)
	}
	if res, ok, err := s.Result(ctx, rk); err != nil || !ok || string(res) != "reply" {
		t.Fatalf("Result after MarkUntil: %q %v %v", res, ok, err)
	}
	sizes, err := s.Sizes(ctx)
	if err != nil || len(sizes) < minSizes {
		t.Fatalf("Sizes: %v, %v", sizes, err)
	}
}
