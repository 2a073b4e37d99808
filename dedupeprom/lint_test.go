package dedupeprom_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errDurationName is the problem lintDurationName reports.
var errDurationName = errors.New("a histogram or summary of seconds should be named _duration_seconds")

// lintDurationName is a promlint validation for the convention promlint does
// not check itself: a distribution of durations in seconds is named
// <what>_duration_seconds (http_request_duration_seconds).
func lintDurationName(mf *dto.MetricFamily) []error {
	switch mf.GetType() {
	case dto.MetricType_HISTOGRAM, dto.MetricType_SUMMARY, dto.MetricType_GAUGE_HISTOGRAM:
	default:
		return nil
	}
	name := mf.GetName()
	if strings.HasSuffix(name, "_seconds") && !strings.HasSuffix(name, "_duration_seconds") {
		return []error{errDurationName}
	}
	return nil
}

func TestLintDurationName(t *testing.T) {
	family := func(name string, typ dto.MetricType) *dto.MetricFamily {
		return &dto.MetricFamily{Name: &name, Type: &typ}
	}
	for _, tc := range []struct {
		mf   *dto.MetricFamily
		want int
	}{
		{family("a_duration_seconds", dto.MetricType_HISTOGRAM), 0},
		{family("a_seconds", dto.MetricType_HISTOGRAM), 1},
		{family("a_seconds", dto.MetricType_SUMMARY), 1},
		{family("a_seconds_total", dto.MetricType_COUNTER), 0},
		{family("a_seconds", dto.MetricType_GAUGE), 0},
		{family("a_bytes", dto.MetricType_HISTOGRAM), 0},
	} {
		assert.Len(t, lintDurationName(tc.mf), tc.want, tc.mf.GetName())
	}
}

// pendingRenames are exported names that break the conventions in a collector
// this change leaves alone (dedupeprom/queue.go is being moved with the
// durable queue): old name to new. The linter must report each one, so that
// the entry goes away with its rename.
var pendingRenames = map[string]string{}

// TestMetricNamesLint lints, with promlint and lintDurationName, every metric
// the collectors of this package export once a Deduper, a webhook endpoint
// and a queue have worked: help texts, base units, _total counters, reserved
// labels, snake_case and duration names.
func TestMetricNamesLint(t *testing.T) {
	l := promlint.NewWithMetricFamilies(gatherExported(t))
	l.AddCustomValidations(lintDurationName)
	problems, err := l.Lint()
	require.NoError(t, err)
	pending := map[string]bool{}
	for _, p := range problems {
		if _, ok := pendingRenames[p.Metric]; ok && p.Text == errDurationName.Error() {
			pending[p.Metric] = true
			continue
		}
		assert.Failf(t, "lint problem", "%s: %s", p.Metric, p.Text)
	}
	for old, renamed := range pendingRenames {
		assert.True(t, pending[old], "%s is no longer reported: drop its pending rename to %s", old, renamed)
	}
}
