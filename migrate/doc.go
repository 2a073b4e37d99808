// Package migrate copies the marks of one dedupe store to another, and reports
// what a store holds. The command github.com/gatewaykit/dedupe/cmd/dedupe
// ("dedupe migrate", "dedupe stats") is built on it; a program that opens its
// stores itself calls [Copy] and [Stats].
//
// # Optional interfaces
//
// A store takes part by implementing the optional capabilities declared
// beside [dedupe.Store] (store.go), structurally, with exported methods on
// its type: [dedupe.Lister] (walk the marks, a page at a time, from a
// cursor), [dedupe.BulkMarker] (write a batch of marks, each with its own
// expiry), and for [Stats] [dedupe.Counter] and [dedupe.Sizer]. The stores of
// this repository implement them: [dedupe.MemoryStore], [dedupe.SQLiteStore],
// deduperedis.Store and postgres.Store; package dedupetest checks each.
//
// Expiries cross between stores as absolute times on the clock of the
// process that runs the copy. A store whose server keeps its own clock
// (Redis, PostgreSQL) converts: it reads the remaining TTL from the server and
// adds it to the local clock, and writes the server's now plus the remaining
// TTL. So a mark keeps its remaining TTL even if the servers' clocks disagree.
//
// # What is copied
//
// Marks only. A claim is a lease held by a process working against the
// source: that process will Mark or Release it on the source, never on the
// destination, so a copied claim would have no owner there and would hold the
// message InFlight until its lease ran out, stopping the platform's
// redelivery of a message whose processing failed. Claims are counted by
// [Stats] and left behind.
//
// A mark that has expired when its page is read is skipped and counted
// (Summary.Expired). A mark whose key the destination cannot hold (see
// [dedupe.Key.Validate]; a NekoBot file may hold any text) is skipped and
// counted (Summary.Invalid). A mark with no expiry (NekoBot's NULL or an
// unreadable expires_at, present forever) is copied with
// [Options].NoExpiryTTL.
//
// A mark already live at the destination is counted (Summary.Present) and
// keeps the later of its own expiry and the source's, and its result if it
// has one: a copy never shortens a mark, so copying a batch twice is
// harmless. A claim at the destination is replaced by the mark, as
// [dedupe.Store.Mark] does.
//
// Results kept with marks ([dedupe.Store.MarkResult]) are not copied: a copied
// mark has none, so [dedupe.Deduper.DoResult] answers a copy of its message
// as a duplicate without a result.
//
// # Resuming
//
// [Copy] reports a [Checkpoint] after each batch the destination has
// committed: the source's cursor after that batch and the counts so far. A
// run started again with that checkpoint ([Options].Resume) goes on after the
// last committed batch; the batch that was being written when the first run
// died is written again, and its marks then count as present. A destination
// that keeps its marks in memory and writes them to a snapshot file (a
// [dedupe.MemoryStore] opened with a SnapshotPath) is checkpointed only after
// it saved a snapshot.
package migrate
