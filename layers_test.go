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
}

func TestLayers(t *testing.T) {
	const module = "github.com/herald-rt/herald"
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
