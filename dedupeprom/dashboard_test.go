package dedupeprom_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dashboardFile is the Grafana dashboard over the collectors' metrics.
const dashboardFile = "dashboards/dedupe.json"

// datasourceUID is how every panel and query names its data source: the
// dashboard's "datasource" variable.
const datasourceUID = "${datasource}"

type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Datasource *reference               `json:"datasource"`
	GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []struct {
		RefID      string     `json:"refId"`
		Expr       string     `json:"expr"`
		Datasource *reference `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type reference struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type variable struct {
	Name       string     `json:"name"`
	Type       string     `json:"type"`
	Query      any        `json:"query"`
	Definition string     `json:"definition"`
	Datasource *reference `json:"datasource"`
}

// queries returns every PromQL query of the dashboard: each "expr" anywhere
// in the JSON, and the metric selector of each query variable's
// label_values(selector, label).
func queries(t *testing.T, raw []byte, d dashboard) []string {
	t.Helper()
	var tree any
	require.NoError(t, json.Unmarshal(raw, &tree))
	var exprs []string
	walkExprs(tree, &exprs)
	labelValues := regexp.MustCompile(`^label_values\(\s*(.+?)\s*,\s*[a-zA-Z_]\w*\s*\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := v.Definition
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		} else if s, ok := v.Query.(string); ok {
			q = s
		}
		m := labelValues.FindStringSubmatch(q)
		require.NotNil(t, m, "variable %s: a query variable is label_values(metric, label), not %q", v.Name, q)
		exprs = append(exprs, m[1])
	}
	return exprs
}

// walkExprs appends to exprs the string value of every "expr" key in tree.
func walkExprs(tree any, exprs *[]string) {
	switch v := tree.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "expr" {
				*exprs = append(*exprs, s)
			}
			walkExprs(x, exprs)
		}
	case []any:
		for _, x := range v {
			walkExprs(x, exprs)
		}
	}
}

// family returns the exported family a series name belongs to: the name
// itself, or for a histogram its _bucket, _sum and _count series. A
// histogram's bare name selects no classic series, so it is no match.
func family(name string, exported map[string]dto.MetricType) (string, error) {
	if typ, ok := exported[name]; ok {
		if typ == dto.MetricType_HISTOGRAM {
			return "", fmt.Errorf("%s is a histogram: query its _bucket, _sum or _count series", name)
		}
		return name, nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if typ, known := exported[base]; ok && known && typ == dto.MetricType_HISTOGRAM {
			return base, nil
		}
	}
	return "", fmt.Errorf("%s is not a metric the collectors export", name)
}

// TestDashboardQueriesExportedMetrics checks that every metric the dashboard
// queries is one the collectors export after a real Deduper, a webhook
// endpoint and a queue have worked, and that the dashboard shows each of them.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))

	exported := map[string]dto.MetricType{}
	for _, f := range gatherExported(t) {
		exported[f.GetName()] = f.GetType()
	}
	exprs := queries(t, raw, d)
	require.NotEmpty(t, exprs)
	shown := map[string]bool{}
	for _, expr := range exprs {
		names, err := metricNames(expr)
		require.NoError(t, err)
		assert.NotEmpty(t, names, "a query that selects no metric: %q", expr)
		for _, name := range names {
			f, err := family(name, exported)
			if assert.NoError(t, err, expr) {
				shown[f] = true
			}
			if strings.HasSuffix(name, "_bucket") {
				assert.Regexp(t, `histogram_quantile\(.*\bby \(le\b`, expr, "buckets are read by le")
			}
		}
	}
	for name := range exported {
		assert.True(t, shown[name], "the dashboard shows no panel of %s", name)
	}
}

// TestDashboardShape checks what Grafana needs to import the dashboard and
// lay it out: a current schema, a data source variable every panel and query
// uses, unique panel ids, a query per panel with distinct refIds, and panels
// on the 24-column grid that do not overlap.
func TestDashboardShape(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	assert.GreaterOrEqual(t, d.SchemaVersion, 39)
	assert.NotEmpty(t, d.UID)
	assert.NotEmpty(t, d.Title)

	var hasDatasource bool
	for _, v := range d.Templating.List {
		if v.Name == "datasource" {
			hasDatasource = v.Type == "datasource" && v.Query == "prometheus"
		}
		if v.Type == "query" {
			assert.Equal(t, &reference{"prometheus", datasourceUID}, v.Datasource, "variable %s", v.Name)
		}
	}
	assert.True(t, hasDatasource, "a datasource variable over Prometheus data sources")

	ids := map[int]bool{}
	var grid [][24]bool
	for _, p := range allPanels(d.Panels) {
		assert.False(t, ids[p.ID], "panel id %d is used twice", p.ID)
		ids[p.ID] = true
		checkPlace(t, p, &grid)
		if p.Type == "row" {
			continue
		}
		assert.Equal(t, &reference{"prometheus", datasourceUID}, p.Datasource, "panel %q", p.Title)
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		refs := map[string]bool{}
		for _, q := range p.Targets {
			assert.False(t, refs[q.RefID], "panel %q: refId %q twice", p.Title, q.RefID)
			refs[q.RefID] = true
			assert.NotEmpty(t, q.RefID, "panel %q", p.Title)
			assert.NotEmpty(t, q.Expr, "panel %q", p.Title)
			assert.Equal(t, &reference{"prometheus", datasourceUID}, q.Datasource, "panel %q", p.Title)
		}
	}
}

// allPanels returns the panels with those of collapsed rows.
func allPanels(ps []panel) []panel {
	var all []panel
	for _, p := range ps {
		all = append(all, p)
		all = append(all, allPanels(p.Panels)...)
	}
	return all
}

// checkPlace marks p's cells in grid, failing if p leaves the 24 columns or
// covers a cell another panel covers.
func checkPlace(t *testing.T, p panel, grid *[][24]bool) {
	t.Helper()
	g := p.GridPos
	if !assert.True(t, g.W > 0 && g.H > 0 && g.X >= 0 && g.Y >= 0 && g.X+g.W <= 24,
		"panel %q: gridPos %+v", p.Title, g) {
		return
	}
	for len(*grid) < g.Y+g.H {
		*grid = append(*grid, [24]bool{})
	}
	for y := g.Y; y < g.Y+g.H; y++ {
		for x := g.X; x < g.X+g.W; x++ {
			assert.False(t, (*grid)[y][x], "panel %q overlaps another at (%d,%d)", p.Title, x, y)
			(*grid)[y][x] = true
		}
	}
}
