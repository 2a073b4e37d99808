package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"regexp"
	"sort"
	"strings"
)

// module is one module of the repository: its directory relative to the
// repository root ("." for the root) and what its go.mod says.
type module struct {
	Dir     string
	Path    string
	Require []modVersion
	Replace []replacement
}

type modVersion struct {
	Path    string
	Version string
}

type replacement struct {
	Old modVersion
	New modVersion
}

// trackedFiles lists the files git tracks in the work tree, slash-separated
// and relative to the repository root, leaving out those deleted from it.
func trackedFiles() ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Lstat(f); errors.Is(err, os.ErrNotExist) {
			continue // tracked but deleted in the work tree: not published
		}
		files = append(files, f)
	}
	sort.Strings(files)
	return files, nil
}

// findModules reads the go.mod of every tracked module, the root first. A
// go.mod under testdata, or in a directory whose name starts with "." or "_",
// is test data, not a module; its directory is still left out of the module
// around it, as the go command does.
func findModules(files []string) ([]module, error) {
	var mods []module
	for _, f := range files {
		if path.Base(f) != "go.mod" || !isModuleDir(path.Dir(f)) {
			continue
		}
		m, err := readGoMod(f)
		if err != nil {
			return nil, err
		}
		m.Dir = path.Dir(f)
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Dir < mods[j].Dir }) // "." first
	if len(mods) == 0 || mods[0].Dir != "." {
		return nil, errors.New("no go.mod at the repository root: run from the root of the repository")
	}
	return mods, nil
}

func isModuleDir(dir string) bool {
	if dir == "." {
		return true
	}
	for _, elem := range strings.Split(dir, "/") {
		if elem == "testdata" || strings.HasPrefix(elem, ".") || strings.HasPrefix(elem, "_") {
			return false
		}
	}
	return true
}

// readGoMod parses a go.mod or go.work file with `go mod edit -json` (or `go
// work edit -json`), which needs nothing beyond the go command.
func readGoMod(file string) (module, error) {
	verb := "mod"
	if path.Base(file) == "go.work" {
		verb = "work"
	}
	cmd := exec.Command("go", verb, "edit", "-json", file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return module{}, fmt.Errorf("%s: go %s edit -json: %v: %s", file, verb, err, strings.TrimSpace(stderr.String()))
	}
	var parsed struct {
		Module  modVersion
		Require []modVersion
		Replace []replacement
	}
	if err := json.Unmarshal(out, &parsed); err != nil {
		return module{}, fmt.Errorf("%s: %w", file, err)
	}
	return module{Path: parsed.Module.Path, Require: parsed.Require, Replace: parsed.Replace}, nil
}

var (
	semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)
	pseudo = regexp.MustCompile(`[-.](0\.)?[0-9]{14}-[0-9a-f]{12}$`)
)

// releaseVersion returns the one version at which the modules require each
// other. It fails on a replace directive in any go.mod, on two versions, and
// on a version that is not a release or pre-release (a pseudo-version names
// a commit, not a tag).
func releaseVersion(mods []module) (string, error) {
	inTree := map[string]bool{}
	for _, m := range mods {
		inTree[m.Path] = true
	}
	versions := map[string][]string{} // version -> "dir/go.mod requires path"
	for _, m := range mods {
		gomod := path.Join(m.Dir, "go.mod")
		if len(m.Replace) > 0 {
			r := m.Replace[0]
			return "", fmt.Errorf("%s: replace %s: a published go.mod must not replace modules (a dependency's replace is ignored); develop through go.work", gomod, r.Old.Path)
		}
		for _, r := range m.Require {
			if inTree[r.Path] {
				versions[r.Version] = append(versions[r.Version], gomod+" requires "+r.Path+" "+r.Version)
			}
		}
	}
	if len(versions) == 0 {
		return "", errors.New("no go.mod requires another module of the repository: no release version to publish")
	}
	if len(versions) > 1 {
		var lines []string
		for _, reqs := range versions {
			lines = append(lines, reqs...)
		}
		sort.Strings(lines)
		return "", fmt.Errorf("the modules require each other at %d versions; a release bumps them all to one:\n\t%s", len(versions), strings.Join(lines, "\n\t"))
	}
	for v, reqs := range versions {
		if !semver.MatchString(v) || pseudo.MatchString(v) {
			return "", fmt.Errorf("%s: %s is not a release version (vMAJOR.MINOR.PATCH[-pre-release]): tag names it", reqs[0], v)
		}
		return v, nil
	}
	panic("unreachable")
}

// checkWorkspace checks that go.work uses every module and replaces each
// module that another one requires, at the release version, by its
// directory: the version exists only once it is tagged.
func checkWorkspace(mods []module, version string) error {
	if _, err := os.Stat("go.work"); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	work, err := readGoMod("go.work")
	if err != nil {
		return err
	}
	have := map[modVersion]string{}
	for _, r := range work.Replace {
		if r.Old.Version != version && isTreeModule(mods, r.Old.Path) {
			return fmt.Errorf("go.work: replace %s %s: the modules require %s; bump it with the go.mod files", r.Old.Path, r.Old.Version, version)
		}
		have[r.Old] = strings.TrimSuffix(strings.TrimPrefix(r.New.Path, "./"), "/")
	}
	for _, m := range mods {
		for _, r := range m.Require {
			dep, ok := treeModule(mods, r.Path)
			if !ok {
				continue
			}
			want := dep.Dir
			if got, ok := have[r]; !ok || (got != want && !(want == "." && got == "")) {
				return fmt.Errorf("go.work: want \"replace %s %s => ./%s\" (%s/go.mod requires it, and it exists only once tagged)", r.Path, r.Version, strings.TrimPrefix(want, "."), m.Dir)
			}
		}
	}
	return nil
}

func isTreeModule(mods []module, modPath string) bool {
	_, ok := treeModule(mods, modPath)
	return ok
}

func treeModule(mods []module, modPath string) (module, bool) {
	for _, m := range mods {
		if m.Path == modPath {
			return m, true
		}
	}
	return module{}, false
}

// moduleFiles returns the tracked files of m, relative to its directory,
// leaving out the directories of the modules nested in it.
func moduleFiles(m module, mods []module, files []string) []string {
	var nested []string
	for _, f := range files {
		if path.Base(f) == "go.mod" && path.Dir(f) != m.Dir && inDir(path.Dir(f), m.Dir) {
			nested = append(nested, path.Dir(f))
		}
	}
	var own []string
	for _, f := range files {
		if !inDir(f, m.Dir) {
			continue
		}
		inNested := false
		for _, n := range nested {
			inNested = inNested || inDir(f, n)
		}
		if !inNested {
			own = append(own, strings.TrimPrefix(f, m.Dir+"/"))
		}
	}
	return own
}

// inDir reports whether the slash-separated path f is dir or under it.
func inDir(f, dir string) bool {
	return dir == "." || f == dir || strings.HasPrefix(f, dir+"/")
}
