package retry_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/retrykit/retry"

// imports maps each package directory of the module (relative, "." for the
// root) to the imports of its non-test files.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "benchmarks") {
				return filepath.SkipDir // benchmarks/ is a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			pkgs[dir] = append(pkgs[dir], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func isStd(path string) bool { return !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") }

// TestDependencyDirection keeps the arrows pointing one way (cmd → service →
// retry → backoff) and keeps backoff and the root package on the standard
// library alone, so a user who only wants retry.Do pulls in nothing else.
func TestDependencyDirection(t *testing.T) {
	t.Parallel()
	pkgs := imports(t)
	if len(pkgs["."]) == 0 || len(pkgs["backoff"]) == 0 {
		t.Fatalf("found no imports for the root or backoff packages: %v", pkgs)
	}
	allowed := map[string][]string{ // module packages each may import, beyond the standard library
		"backoff": {},
		".":       {"backoff"},
	}
	for dir, imps := range pkgs {
		for _, imp := range imps {
			internal := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			inModule := imp == module || strings.HasPrefix(imp, module+"/")
			if imp == module {
				internal = "."
			}
			if list, strict := allowed[dir]; strict {
				if isStd(imp) {
					continue
				}
				if !inModule || !contains(list, internal) {
					t.Errorf("%s imports %s: it may import only the standard library and %v", dir, imp, list)
				}
				continue
			}
			if !inModule {
				continue
			}
			switch {
			case strings.HasPrefix(internal, "cmd/") && !sameCommand(dir, internal):
				t.Errorf("%s imports the command %s", dir, imp)
			case !strings.HasPrefix(dir, "cmd/") && !strings.HasPrefix(dir, "service") && !strings.HasPrefix(dir, "client") && !strings.HasPrefix(dir, "examples") &&
				(strings.HasPrefix(internal, "service") || strings.HasPrefix(internal, "client")):
				t.Errorf("library package %s imports %s: the service depends on the library, not the other way", dir, imp)
			}
		}
	}
}

// sameCommand reports whether dir and pkg belong to one command, cmd/NAME:
// a command may split itself into packages of its own.
func sameCommand(dir, pkg string) bool {
	cmd := func(p string) string {
		parts := strings.SplitN(p, "/", 3)
		if len(parts) < 2 || parts[0] != "cmd" {
			return ""
		}
		return parts[1]
	}
	return cmd(dir) != "" && cmd(dir) == cmd(pkg)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestRootModuleRequiresNothing: go get github.com/retrykit/retry brings
// nothing into a program's build but this module. The transports, Kafka and
// the service are modules of their own (see go.work).
func TestRootModuleRequiresNothing(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "require" || f[0] == "replace") {
			t.Errorf("go.mod: %q: the root module must require nothing", line)
		}
	}
}
