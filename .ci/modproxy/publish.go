package main

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"
)

// The limits the go command enforces on a module zip (golang.org/x/mod/zip).
const (
	maxZipSize   = 500 << 20 // the files' total uncompressed size
	maxGoModSize = 16 << 20
	maxLICENSE   = 16 << 20
)

// publish writes m at version into the file module proxy out. files are the
// module's files relative to its directory; license, if not empty, is the
// repository's LICENSE, added when the module has none of its own.
func publish(out string, m module, version string, files []string, license string) error {
	escaped, err := escapePath(m.Path)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(filepath.FromSlash(m.Dir), "go.mod"))
	if err != nil {
		return err
	}
	if len(gomod) > maxGoModSize {
		return fmt.Errorf("go.mod is larger than %d bytes", maxGoModSize)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": info,
		version + ".mod":  gomod,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	entries := map[string]string{} // name in the module -> file in the work tree
	for _, f := range files {
		entries[f] = path.Join(m.Dir, f)
	}
	if _, ok := entries["LICENSE"]; !ok && license != "" {
		entries["LICENSE"] = license
	}
	return writeZip(filepath.Join(dir, version+".zip"), m.Path+"@"+version+"/", entries)
}

// writeZip writes the module zip file: each entry under prefix, in name
// order. It fails where the go command would refuse the zip: a name that
// differs from another only in case, a file that is not a regular file, a
// LICENSE or module over its size limit.
func writeZip(file, prefix string, entries map[string]string) (err error) {
	names := make([]string, 0, len(entries))
	folded := map[string]string{}
	for name := range entries {
		if other, ok := folded[strings.ToLower(name)]; ok {
			return fmt.Errorf("%s and %s differ only in case", other, name)
		}
		folded[strings.ToLower(name)] = name
		names = append(names, name)
	}
	sort.Strings(names)
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	zw := zip.NewWriter(f)
	var total int64
	for _, name := range names {
		n, err := addFile(zw, prefix+name, entries[name])
		if err != nil {
			return err
		}
		if name == "LICENSE" && n > maxLICENSE {
			return fmt.Errorf("%s is larger than %d bytes", entries[name], maxLICENSE)
		}
		if total += n; total > maxZipSize {
			return fmt.Errorf("the module's files add up to more than %d bytes", maxZipSize)
		}
	}
	return zw.Close()
}

// addFile copies the regular file src into zw as name and returns its size.
func addFile(zw *zip.Writer, name, src string) (int64, error) {
	fi, err := os.Lstat(src)
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s is tracked but not a regular file (%v): a module zip holds regular files only", src, fi.Mode().Type())
	}
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
	if err != nil {
		return 0, err
	}
	return io.Copy(w, in)
}

// escapePath is module.EscapePath of golang.org/x/mod: each upper-case
// letter becomes "!" and its lower-case form, so that the proxy's paths are
// the same on case-insensitive file systems.
func escapePath(modPath string) (string, error) {
	var b strings.Builder
	for _, r := range modPath {
		switch {
		case r == '!' || r >= unicode.MaxASCII:
			return "", fmt.Errorf("module path %q: invalid character %q", modPath, r)
		case 'A' <= r && r <= 'Z':
			b.WriteByte('!')
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), nil
}
