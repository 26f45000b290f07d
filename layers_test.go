package herald

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The layers of a node, each importing only the ones below it (docs/architecture.md): the
// fan-out engine knows nothing of the Pusher protocol, the sockets or the cluster; the cluster
// layer speaks to the engine and to the bus contract, and knows nothing of the protocol or the
// sockets; the Pusher session sits on both. Go forbids import cycles; this test forbids the
// imports that would not be cycles but would break the layering.

// layerImports lists, for each layer's package, the herald packages it may import (besides
// the root vocabulary and internal/).
var layerImports = map[string][]string{
	"fanout":  {},
	"cluster": {"fanout"},
	"session": {"fanout", "cluster", "pusher", "ws", "guard"},
	// The configuration (load, defaults, validation) imports no runtime package, only the
	// root's domain types: cmd/herald hands in the checks only a runtime package can make
	// (config.Checks).
	"config": {},
}

const module = "github.com/herald-rt/herald"

func TestLayers(t *testing.T) {
	for dir, allowed := range layerImports {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v): run the test from the repository root", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			ast, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range ast.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				rel, ok := strings.CutPrefix(path, module+"/")
				if !ok || strings.HasPrefix(rel, "internal/") {
					continue // the standard library, a dependency, the root, or internal/
				}
				ok = false
				for _, a := range allowed {
					ok = ok || rel == a
				}
				if !ok {
					t.Errorf("%s imports %s: the %s layer may import only %v of herald's packages (and the root, internal/)",
						f, rel, dir, allowed)
				}
			}
		}
	}
}

// loadGenerator is the load generator's package and the dependency only it uses: the server
// (cmd/herald and every package it links) imports neither; its own command,
// cmd/herald-bench, does.
var loadGenerator = []string{module + "/bench", "github.com/HdrHistogram/hdrhistogram-go"}

// TestServerWithoutLoadGenerator follows the imports of cmd/herald's non-test files through
// every herald package they reach and fails if one imports the load generator.
func TestServerWithoutLoadGenerator(t *testing.T) {
	seen := map[string]bool{}
	queue := []string{"cmd/herald"}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		if seen[dir] {
			continue
		}
		seen[dir] = true
		for path, file := range packageImports(t, dir) {
			for _, lg := range loadGenerator {
				if path == lg || strings.HasPrefix(path, lg+"/") {
					t.Errorf("%s imports %s: the server must not link the load generator (cmd/herald-bench is its command)", file, path)
				}
			}
			if rel, ok := strings.CutPrefix(path, module+"/"); ok {
				queue = append(queue, rel)
			}
		}
	}
	if len(seen) < 10 {
		t.Fatalf("cmd/herald reached only %d packages: run the test from the repository root", len(seen))
	}
}

// packageImports returns the import paths of dir's non-test Go files, each with one file
// that imports it.
func packageImports(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no Go files (%v): run the test from the repository root", dir, err)
	}
	imports := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			imports[strings.Trim(imp.Path.Value, `"`)] = f
		}
	}
	return imports
}
