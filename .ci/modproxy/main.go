// Command modproxy publishes every module of this repository, from the files
// git tracks in the work tree, to a file module proxy (the layout `go help
// goproxy` describes), at the version the modules require each other with.
//
// Run it from the repository root:
//
//	go run ./.ci/modproxy -out DIR
//
// It first checks what a release needs: no go.mod has a replace directive
// (a dependency's replace is ignored, so a user's build would not see it),
// every requirement on a module of the repository names one version, and the
// go.work file replaces each required module at that version by its
// directory. It then writes, for each module, DIR/<escaped path>/@v/list,
// <version>.info, <version>.mod and <version>.zip. A zip holds the module's
// tracked files under <path>@<version>/, without the directories of nested
// modules, plus the repository's LICENSE when the module has none, as the go
// command does when it zips a module in a subdirectory of a repository.
//
// It prints one line per module, "<path> <version> <dir>", and exits 1 with a
// message naming the file at fault on any failure.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "", "directory to write the file module proxy into (required)")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./.ci/modproxy -out DIR")
		os.Exit(2)
	}
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

// run publishes the modules of the repository in the working directory to
// the proxy directory out.
func run(out string) error {
	files, err := trackedFiles()
	if err != nil {
		return err
	}
	mods, err := findModules(files)
	if err != nil {
		return err
	}
	version, err := releaseVersion(mods)
	if err != nil {
		return err
	}
	if err := checkWorkspace(mods, version); err != nil {
		return err
	}
	license := ""
	if contains(files, "LICENSE") {
		license = "LICENSE"
	}
	for _, m := range mods {
		if err := publish(out, m, version, moduleFiles(m, mods, files), license); err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
		fmt.Printf("%s %s %s\n", m.Path, version, filepath.ToSlash(m.Dir))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
