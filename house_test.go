package dedupe_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The house's limits, checked on every non-test Go file of the repository:
// no file over 700 lines, no function over 70, and the root package, the
// product card, with at most 70 exported top-level names (60 until the
// store's optional capabilities came beside Store, issue 33: one place for
// the contract is worth six names on the card).
func TestHouseLimits(t *testing.T) {
	const maxFileLines, maxFuncLines, maxRootNames = 700, 70, 70
	fset := token.NewFileSet()
	rootNames := 0
	err := filepath.WalkDir(".", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (strings.HasPrefix(e.Name(), ".") || e.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			t.Errorf("%s: %d lines, over %d", path, n, maxFileLines)
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
				if n > maxFuncLines {
					t.Errorf("%s: func %s: %d lines, over %d", path, fn.Name.Name, n, maxFuncLines)
				}
			}
		}
		if filepath.Dir(path) == "." {
			rootNames += exportedNames(f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("root package: %d exported top-level names", rootNames)
	if rootNames > maxRootNames {
		t.Errorf("the root package exports %d top-level names, over %d", rootNames, maxRootNames)
	}
}

// exportedNames counts the exported top-level names f declares: types,
// functions, constants and variables (methods belong to their types).
func exportedNames(f *ast.File) int {
	n := 0
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.IsExported() {
				n++
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						n++
					}
				case *ast.ValueSpec:
					for _, name := range s.Names {
						if name.IsExported() {
							n++
						}
					}
				}
			}
		}
	}
	return n
}

// Every test docs/guarantees.md names as a proof exists.
func TestGuaranteesNameRealTests(t *testing.T) {
	doc, err := os.ReadFile("docs/guarantees.md")
	if err != nil {
		t.Fatal(err)
	}
	defined := make(map[string]bool)
	err = filepath.WalkDir(".", func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := testName.FindAllString(string(doc), -1)
	if len(named) < 20 {
		t.Fatalf("docs/guarantees.md names %d tests; it should name the proof of each promise", len(named))
	}
	for _, name := range named {
		if !defined[name] {
			t.Errorf("docs/guarantees.md names %s, which no test file defines", name)
		}
	}
}

var (
	testFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	testName = regexp.MustCompile(`\bTest[A-Z]\w*`)
)

// The webhook middleware's documentation stays readable: go doc -all of
// dedupehttp prints at most 760 lines. Raised from 700 (issue 34): replay
// only when authenticated (WithReplayUnauthenticated) and the Outcome that a
// tracing wrapper reads are documented rather than crammed.
func TestDedupehttpDocLength(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goTool, "doc", "-all", "./dedupehttp").Output()
	if err != nil {
		t.Fatalf("go doc: %v", err)
	}
	if n := strings.Count(string(out), "\n"); n > 760 {
		t.Errorf("go doc -all ./dedupehttp prints %d lines, over 760", n)
	}
}
