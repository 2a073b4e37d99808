package dedupe_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The map is code: docs/architecture.md names every package of every module of
// the workspace with its layer, the imports obey the rules it states, and its
// drawings show exactly the imports between the packages they draw. One go
// list call reads the real graph.
func TestArchitecture(t *testing.T) {
	pkgs := listWorkspace(t)
	doc, err := os.ReadFile("docs/architecture.md")
	require.NoError(t, err)
	layers, problems := parseLayerTable(string(doc))
	require.NotEmpty(t, layers, "docs/architecture.md has no table with the columns package and layer")
	noViolations(t, "the package table", append(problems, tableCoverage(pkgs, layers)...))
	noViolations(t, "rule (a), a package imports only packages of lower layers", downward(pkgs, layers))
	noViolations(t, "rule (b), no package imports an internal/ package of another module", internalImports(pkgs))
	noViolations(t, "rule (c), the store modules do not depend on net/http", storeHTTP(pkgs))
	noViolations(t, "rule (d), a test rig is imported only by test rigs and examples/", rigImports(pkgs))
	drawings := mermaidBlocks(string(doc))
	require.NotEmpty(t, drawings, "docs/architecture.md has no mermaid drawing")
	for i, d := range drawings {
		noViolations(t, fmt.Sprintf("mermaid drawing %d", i+1), checkDrawing(pkgs, d))
	}
}

// noViolations fails t with one line for each violation of rule.
func noViolations(t *testing.T, rule string, violations []string) {
	t.Helper()
	if len(violations) > 0 {
		assert.Fail(t, "docs/architecture.md: "+rule, strings.Join(violations, "\n"))
	}
}

const modulePath = "github.com/gatewaykit/dedupe"

// archPackage is one non-test package of the workspace, as go list tells it.
type archPackage struct {
	module  string   // the path of its module
	imports []string // the packages of this repository it imports, by short name
	tests   []string // the packages of this repository its tests import, by short name
	deps    []string // every package it depends on, by import path
}

// shortName is a package's name in docs/architecture.md: its import path
// relative to the root module, and "dedupe" for the root package. ok is false
// for a package outside this repository.
func shortName(importPath string) (name string, ok bool) {
	if importPath == modulePath {
		return "dedupe", true
	}
	return strings.CutPrefix(importPath, modulePath+"/")
}

// listWorkspace lists every non-test package of every module of the go.work
// workspace, by short name. It skips t without a go command or a workspace.
func listWorkspace(t *testing.T) map[string]archPackage {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goTool, "env", "GOWORK").Output()
	if gowork := strings.TrimSpace(string(out)); err != nil || gowork == "" || gowork == "off" {
		t.Skip("no go.work workspace: the map covers every module of the workspace")
	}
	const format = "{{.ImportPath}}\t{{.Module.Path}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}\t" +
		"{{join .TestImports \" \"}} {{join .XTestImports \" \"}}"
	out, err = exec.Command(goTool, "list", "-f", format, modulePath+"/...").Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		require.FailNowf(t, "go list failed", "%v\n%s", err, exit.Stderr)
	}
	require.NoError(t, err, "go list")
	pkgs := make(map[string]archPackage)
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		require.Len(t, f, 5, "go list printed %q", line)
		name, _ := shortName(f[0])
		p := archPackage{module: f[1], deps: strings.Fields(f[3])}
		p.imports = ownPackages(strings.Fields(f[2]))
		p.tests = ownPackages(strings.Fields(f[4]))
		pkgs[name] = p
	}
	require.NotEmpty(t, pkgs, "go list %s/... listed no package", modulePath)
	return pkgs
}

// ownPackages returns the packages of this repository among paths, by short
// name.
func ownPackages(paths []string) []string {
	var own []string
	for _, p := range paths {
		if short, ok := shortName(p); ok {
			own = append(own, short)
		}
	}
	return own
}

// tableCell is the name a cell of the package table gives in backquotes.
var tableCell = regexp.MustCompile("`([^`]+)`")

// parseLayerTable reads the layer of each package from the tables of doc
// whose header has the columns "package" and "layer", and lists the rows it
// cannot read.
func parseLayerTable(doc string) (map[string]int, []string) {
	layers := make(map[string]int)
	var problems []string
	pkgCol, layerCol := -1, -1 // the columns of the table being read; -1 outside one
	for line := range strings.Lines(doc) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			pkgCol, layerCol = -1, -1
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case pkgCol < 0:
			pkgCol, layerCol = slices.Index(cells, "package"), slices.Index(cells, "layer")
			if layerCol < 0 {
				pkgCol = -1
			}
		case strings.HasPrefix(cells[0], "---"): // the header's separator
		case max(pkgCol, layerCol) >= len(cells):
			problems = append(problems, fmt.Sprintf("row %q has too few cells", line))
		default:
			problems = append(problems, addRow(layers, cells[pkgCol], cells[layerCol])...)
		}
	}
	return layers, problems
}

// addRow records one row of the package table in layers, or says what is
// wrong with it.
func addRow(layers map[string]int, pkgCell, layerCell string) []string {
	m := tableCell.FindStringSubmatch(pkgCell)
	if m == nil {
		return []string{fmt.Sprintf("row %q names no package in backquotes", pkgCell)}
	}
	layer, err := strconv.Atoi(layerCell)
	if err != nil || layer < 0 {
		return []string{fmt.Sprintf("row %s: layer %q is not a number", m[1], layerCell)}
	}
	if _, dup := layers[m[1]]; dup {
		return []string{fmt.Sprintf("%s has two rows", m[1])}
	}
	layers[m[1]] = layer
	return nil
}

// tableCoverage lists the packages without a row, and the rows that name no
// package of the workspace.
func tableCoverage(pkgs map[string]archPackage, layers map[string]int) []string {
	var v []string
	for _, name := range slices.Sorted(maps.Keys(pkgs)) {
		if _, ok := layers[name]; !ok {
			v = append(v, fmt.Sprintf("package %s has no row", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(layers)) {
		if _, ok := pkgs[name]; !ok {
			v = append(v, fmt.Sprintf("the row %s names no package that go list lists", name))
		}
	}
	return v
}

// edges calls fn for each import between two packages of this repository,
// in order.
func edges(pkgs map[string]archPackage, fn func(from, to string)) {
	for _, from := range slices.Sorted(maps.Keys(pkgs)) {
		for _, to := range pkgs[from].imports {
			fn(from, to)
		}
	}
}

// downward lists the imports against rule (a): each goes to a lower layer,
// or from layer 0 to layer 0. Packages without a row are reported elsewhere.
func downward(pkgs map[string]archPackage, layers map[string]int) []string {
	var v []string
	edges(pkgs, func(from, to string) {
		lf, okFrom := layers[from]
		lt, okTo := layers[to]
		if okFrom && okTo && lt >= lf && (lf > 0 || lt > 0) {
			v = append(v, fmt.Sprintf("%s (layer %d) imports %s (layer %d)", from, lf, to, lt))
		}
	})
	return v
}

// isInternal reports whether the package named is an internal package, which
// Go lets every package under its parent import.
func isInternal(name string) bool {
	return strings.HasPrefix(name, "internal/") || strings.Contains(name, "/internal/") ||
		name == "internal" || strings.HasSuffix(name, "/internal")
}

// internalImports lists the imports against rule (b): an internal package
// imported from another module, by a package or by its tests.
func internalImports(pkgs map[string]archPackage) []string {
	var v []string
	for _, from := range slices.Sorted(maps.Keys(pkgs)) {
		for _, to := range slices.Concat(pkgs[from].imports, pkgs[from].tests) {
			if isInternal(to) && pkgs[from].module != pkgs[to].module {
				v = append(v, fmt.Sprintf("%s (module %s) or its tests import %s of module %s",
					from, pkgs[from].module, to, pkgs[to].module))
			}
		}
	}
	return slices.Compact(v)
}

// storeHTTP lists the dependencies against rule (c): net/http among the
// dependencies of a package of a store module.
func storeHTTP(pkgs map[string]archPackage) []string {
	var v []string
	for _, module := range []string{modulePath + "/deduperedis", modulePath + "/postgres"} {
		found := false
		for _, name := range slices.Sorted(maps.Keys(pkgs)) {
			if pkgs[name].module != module {
				continue
			}
			found = true
			for _, dep := range pkgs[name].deps {
				if dep == "net/http" {
					v = append(v, fmt.Sprintf("%s depends on net/http (go list -deps)", name))
				}
			}
		}
		if !found {
			v = append(v, fmt.Sprintf("go list lists no package of module %s", module))
		}
	}
	return v
}

// isRig reports whether the package named is a test rig: under dedupetest/,
// or named …test.
func isRig(name string) bool {
	return strings.HasPrefix(name, "dedupetest/") || strings.HasSuffix(path.Base(name), "test")
}

// rigImports lists the imports against rule (d): a test rig imported by a
// package that is neither a test rig nor an example.
func rigImports(pkgs map[string]archPackage) []string {
	var v []string
	edges(pkgs, func(from, to string) {
		if isRig(to) && !isRig(from) && !strings.HasPrefix(from, "examples/") {
			v = append(v, fmt.Sprintf("%s imports the test rig %s", from, to))
		}
	})
	return v
}

// mermaidBlocks returns the text of each mermaid block of doc.
func mermaidBlocks(doc string) []string {
	var blocks []string
	for _, part := range strings.Split(doc, "```mermaid\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		blocks = append(blocks, block)
	}
	return blocks
}

// arrow is an arrow of a drawing, between the ids of two nodes.
type arrow struct{ from, to string }

var (
	drawnNode  = regexp.MustCompile(`^(\w+)\["([^"]*)"\]$`)
	drawnArrow = regexp.MustCompile(`^(\w+) --> (\w+)$`)
)

// parseDrawing reads the nodes (id["label"], one a line) and the arrows
// (a --> b, one a line) of a mermaid flowchart; other lines (flowchart,
// subgraph, end) it passes over.
func parseDrawing(block string) (map[string]string, map[arrow]bool, []string) {
	nodes, arrows := make(map[string]string), make(map[arrow]bool)
	var problems []string
	for line := range strings.Lines(block) {
		line = strings.TrimSpace(line)
		if m := drawnNode.FindStringSubmatch(line); m != nil {
			if _, dup := nodes[m[1]]; dup {
				problems = append(problems, fmt.Sprintf("node %s is drawn twice", m[1]))
			}
			nodes[m[1]] = m[2]
		} else if m := drawnArrow.FindStringSubmatch(line); m != nil {
			arrows[arrow{m[1], m[2]}] = true
		} else if strings.Contains(line, "-->") {
			problems = append(problems, fmt.Sprintf("cannot read %q: write one arrow a line, a --> b", line))
		}
	}
	for _, a := range slices.SortedFunc(maps.Keys(arrows), compareArrows) {
		for _, id := range []string{a.from, a.to} {
			if _, ok := nodes[id]; !ok {
				problems = append(problems, fmt.Sprintf("the arrow %s --> %s names node %s, which is not defined", a.from, a.to, id))
			}
		}
	}
	return nodes, arrows, problems
}

func compareArrows(a, b arrow) int {
	return strings.Compare(a.from+" "+a.to, b.from+" "+b.to)
}

// drawnPackages maps each package a drawing shows to the id of its node: a
// label names a package ("queue") or, ending in "/*", the packages under it
// ("internal/*").
func drawnPackages(pkgs map[string]archPackage, nodes map[string]string) (map[string]string, []string) {
	owner := make(map[string]string)
	var problems []string
	for _, id := range slices.Sorted(maps.Keys(nodes)) {
		label := nodes[id]
		prefix, group := strings.CutSuffix(label, "*")
		n := 0
		for name := range pkgs {
			if name == label || group && strings.HasPrefix(name, prefix) {
				owner[name] = id
				n++
			}
		}
		if n == 0 {
			problems = append(problems, fmt.Sprintf("node %s[%q] names no package that go list lists", id, label))
		}
	}
	return owner, problems
}

// checkDrawing lists the arrows of a drawing that no import has, and the
// imports between the nodes it draws that it has no arrow for.
func checkDrawing(pkgs map[string]archPackage, block string) []string {
	nodes, drawn, problems := parseDrawing(block)
	owner, more := drawnPackages(pkgs, nodes)
	problems = append(problems, more...)
	real := make(map[arrow]string) // each real arrow, with one import that makes it
	edges(pkgs, func(from, to string) {
		a := arrow{owner[from], owner[to]}
		if _, seen := real[a]; !seen && a.from != "" && a.to != "" && a.from != a.to {
			real[a] = from + " imports " + to
		}
	})
	for _, a := range slices.SortedFunc(maps.Keys(drawn), compareArrows) {
		if _, ok := real[a]; !ok {
			problems = append(problems, fmt.Sprintf("draws %s --> %s, which no import has", a.from, a.to))
		}
	}
	for _, a := range slices.SortedFunc(maps.Keys(real), compareArrows) {
		if !drawn[a] {
			problems = append(problems, fmt.Sprintf("lacks the arrow %s --> %s (%s)", a.from, a.to, real[a]))
		}
	}
	return problems
}
