package dedupeprom_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// promqlFunctions are the PromQL functions a dashboard query may call.
var promqlFunctions = wordSet(`abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time
	ceil changes clamp clamp_max clamp_min cos cosh count_over_time day_of_month day_of_week day_of_year
	days_in_month deg delta deriv double_exponential_smoothing end exp floor histogram_avg histogram_count
	histogram_fraction histogram_quantile histogram_stddev histogram_stdvar histogram_sum holt_winters hour
	idelta increase irate label_join label_replace last_over_time ln log10 log2 mad_over_time max_over_time
	min_over_time minute month pi predict_linear present_over_time quantile_over_time rad rate resets round
	scalar sgn sin sinh sort sort_by_label sort_by_label_desc sort_desc sqrt start stddev_over_time
	stdvar_over_time sum_over_time tan tanh time timestamp vector year`)

// promqlAggregations are the aggregation operators, which take a grouping
// clause before or after their arguments.
var promqlAggregations = wordSet(`avg bottomk count count_values group limit_ratio limitk max min
	quantile stddev stdvar sum topk`)

// promqlGroupings are the keywords followed by a list of label names.
var promqlGroupings = wordSet(`by without on ignoring group_left group_right`)

// promqlKeywords are the other words of the language that name no series.
var promqlKeywords = wordSet(`and or unless bool offset atan2 inf nan`)

func wordSet(words string) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.Fields(words) {
		set[w] = true
	}
	return set
}

// metricNames returns the metric names a PromQL expression selects, in order,
// as written (a histogram's series keep their _bucket, _sum or _count
// suffix). Label matchers, strings, ranges, numbers, durations, grouping
// label lists and Grafana variables ($x, ${x}) are skipped. A call of a
// function it does not know, an unterminated string or bracket, or unbalanced
// parentheses are an error: a query it cannot read must fail the test, not pass it.
func metricNames(expr string) ([]string, error) {
	var names []string
	depth := 0
	for i := 0; i < len(expr); {
		c := expr[i]
		var err error
		switch {
		case c == '"' || c == '\'' || c == '`':
			i, err = skipString(expr, i)
		case c == '{':
			i, err = skipGroup(expr, i, '{', '}')
		case c == '[':
			i, err = skipGroup(expr, i, '[', ']')
		case c == '$':
			i = skipVariable(expr, i)
		case isDigit(c) || c == '.' && i+1 < len(expr) && isDigit(expr[i+1]):
			i = skipWhile(expr, i, func(c byte) bool { return isIdent(c) || c == '.' })
		case isIdentStart(c):
			var name string
			name, i, err = word(expr, i)
			if name != "" {
				names = append(names, name)
			}
		default:
			depth += parenDelta(c)
			if depth < 0 {
				err = fmt.Errorf("unbalanced ) in %q", expr)
			}
			i++
		}
		if err != nil {
			return nil, err
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced ( in %q", expr)
	}
	return names, nil
}

// word reads the identifier at i and returns it if it names a series, with
// the offset after it (and after a grouping clause's label list).
func word(expr string, i int) (name string, next int, err error) {
	end := skipWhile(expr, i, isIdent)
	w := expr[i:end]
	open := skipWhile(expr, end, isSpace)
	called := open < len(expr) && expr[open] == '('
	switch {
	case promqlGroupings[w]:
		if called {
			end, err = skipGroup(expr, open, '(', ')')
		}
		return "", end, err
	case promqlKeywords[w], promqlAggregations[w]:
		return "", end, nil
	case called && promqlFunctions[w]:
		return "", end, nil
	case called:
		return "", end, fmt.Errorf("unknown PromQL function %q in %q", w, expr)
	}
	return w, end, nil
}

// skipString returns the offset after the string literal that starts at i.
func skipString(expr string, i int) (int, error) {
	quote := expr[i]
	for j := i + 1; j < len(expr); j++ {
		switch {
		case expr[j] == '\\' && quote != '`':
			j++
		case expr[j] == quote:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string in %q", expr)
}

// skipGroup returns the offset after the group that opens at i and closes
// with the first close outside a string.
func skipGroup(expr string, i int, open, close byte) (int, error) {
	for j := i + 1; j < len(expr); {
		switch c := expr[j]; c {
		case close:
			return j + 1, nil
		case open:
			return 0, fmt.Errorf("nested %c in %q", open, expr)
		case '"', '\'', '`':
			var err error
			if j, err = skipString(expr, j); err != nil {
				return 0, err
			}
		default:
			j++
		}
	}
	return 0, fmt.Errorf("unterminated %c in %q", open, expr)
}

// skipVariable returns the offset after the Grafana variable at i: $name or
// ${name[:format]}.
func skipVariable(expr string, i int) int {
	if i+1 < len(expr) && expr[i+1] == '{' {
		if end := strings.IndexByte(expr[i:], '}'); end >= 0 {
			return i + end + 1
		}
		return len(expr)
	}
	return skipWhile(expr, i+1, isIdent)
}

func skipWhile(s string, i int, f func(byte) bool) int {
	for i < len(s) && f(s[i]) {
		i++
	}
	return i
}

// parenDelta is how much c changes the depth of parentheses.
func parenDelta(c byte) int {
	switch c {
	case '(':
		return 1
	case ')':
		return -1
	}
	return 0
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isIdentStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == ':'
}

func isIdent(c byte) bool { return isIdentStart(c) || isDigit(c) }

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum by (verdict) (rate(a_total{backend=~"$backend",v="x"}[$__rate_interval]))`, []string{"a_total"}},
		{`histogram_quantile(0.99, sum by (le, phase) (rate(h_bucket{b="}{[("}[5m])))`, []string{"h_bucket"}},
		{`sum(rate(a[1m])) / on (x) group_left (y) sum(b) offset 5m`, []string{"a", "b"}},
		{`sum(x) without (le) > bool 1e3`, []string{"x"}},
		{`a and b unless c or d * 0.5 + .5`, []string{"a", "b", "c", "d"}},
		{`rate(x_sum[5m:1m] @ end()) / ${var:raw}`, []string{"x_sum"}},
		{`label_replace(up{job='a\'b'}, "dst", "$1", "src", "(.*)")`, []string{"up"}},
		{`topk(3, sum by (platform) (q{platform=~"${platform}"}))`, []string{"q"}},
	} {
		got, err := metricNames(tc.expr)
		require.NoError(t, err, tc.expr)
		assert.Equal(t, tc.want, got, tc.expr)
	}
	for _, bad := range []string{
		`no_such_function(a)`,
		`a{x="unterminated}`,
		`rate(a[5m)`,
		`sum(a{x="y"`,
		`sum(rate(a[5m])`,
		`sum(a))`,
	} {
		_, err := metricNames(bad)
		assert.Error(t, err, bad)
	}
}
