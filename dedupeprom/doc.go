// Package dedupeprom exports the counters of a [dedupe.Deduper], of webhook
// endpoints and of their queues as Prometheus metrics.
//
// [NewCollector] returns a [prometheus.Collector] that reads
// [dedupe.Deduper.Stats] at every scrape, so it adds nothing to the Deduper's
// hot path and never drifts from it:
//
//	d := dedupe.New(store)
//	prometheus.MustRegister(dedupeprom.NewCollector(d))
//	http.Handle("/metrics", promhttp.Handler())
//
// ExampleNewCollector, in example_test.go, registers it and reads a counter
// back, compiled and run by go test.
//
// [NewHTTPCollector] and [NewQueueCollector] do the same for the endpoints
// built by dedupehttp.New and dedupehttp.NewAsync.
//
// # Metrics
//
// The names follow the Prometheus conventions: base units (seconds),
// durations named _duration_seconds, counters named _total. A test lints them
// with promlint.
//
// dedupe_decisions_total{backend,verdict} is a counter of the Deduper's
// verdicts: "processed" (the message was handled and marked), "duplicate",
// "in_flight", "released" (the handler failed and the claim was released for
// the platform's retry), "store_error" (a store call failed, in any phase),
// "fallback" (a message was served by the fallback store of
// [dedupe.WithFallback]), "lease_lost" (a claim was taken over while its
// message was processed) and "payload_mismatch" (a copy whose payload
// differed from the processed one's was refused, [dedupe.WithPayloadCheck]).
//
// dedupe_waits_total{backend,outcome} is a counter of the waits of
// [dedupe.WithWait] for the owner of a message in flight: "duplicate" (the
// owner processed it), "claimed" (the owner failed or died, and the waiter
// took the claim) and "timed_out".
//
// dedupe_store_faults_total{backend,event} is a counter of how the Deduper
// met store faults: "ambiguous_claim", "mark_deferred", "mark_replayed" and
// "dropped".
//
// dedupe_evicted_marks_total{backend} is a counter of the marks the store
// evicted before their TTL ran out, to take new ones ([dedupe.Stats].Evicted,
// of a [dedupe.Evicter] such as a full memory store; always 0 for the other
// stores): each key was new again before its window ended, and a copy of its
// message would be processed again. Alert on any increase: the store is too
// small for one TTL of messages, or a flood of distinct ids, even
// authenticated ones, is shortening every message's window.
//
// dedupe_store_duration_seconds{backend,phase} is a histogram of the duration
// of the Deduper's store calls by phase: "claim", "mark", "release" and
// "extend". Its buckets are [dedupe.LatencyStats.Bounds] in seconds.
//
// dedupe_http_deliveries_total{platform,verdict} is a counter of what the
// webhook endpoints built by dedupehttp.New decided before the Deduper:
// "unauthenticated" (refused with 401: a forgery, a stale signature),
// "undeduplicated" (no usable message id, not a protocol request: served
// without deduplication, or refused under
// dedupehttp.WithRefuseUndeduplicated), "protocol" (handshakes, heartbeats)
// and "malformed" (refused with 400). [NewHTTPCollector] exports it.
//
// [NewQueueCollector] exports the queue depth, the outcomes and the handler
// durations of accepted messages by platform; its documentation lists them.
//
// backend is the primary store's [dedupe.Store.Backend]; calls served by a
// fallback store are counted under it too. [WithNamespace] prefixes the metric
// names and [WithConstLabels] adds labels, for example to tell several
// Dedupers registered in one registry apart.
//
// # Dashboard
//
// dashboards/dedupe.json in this module's directory is a Grafana dashboard
// (schema version 39, Grafana 10.4 or later) over these metrics: decisions by
// verdict, the duplicates ratio, waits, store latency percentiles, store
// faults, queue depth and processing by platform, and the webhook edge. Import
// it and pick a Prometheus data source in its "datasource" variable. It
// queries the names without a namespace: with [WithNamespace], prefix them in
// the file. A test checks that every metric it queries is one the collectors
// export.
//
// This package is a module of its own, github.com/gatewaykit/dedupe/dedupeprom,
// so that importing the root package never downloads the Prometheus client.
package dedupeprom
