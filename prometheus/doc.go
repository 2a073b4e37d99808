// Package prometheus exports a [dedupe.Deduper]'s counters as Prometheus metrics.
package prometheus
