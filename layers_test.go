package herald

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
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

// runtimeInternal are the internal/ packages that no layer may import all the same: they link
// the runtime packages (internal/runtimechecks: config's tests load with it, cmd/herald hands
// it to config.Load).
var runtimeInternal = []string{"internal/runtimechecks"}

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
				if !ok || strings.HasPrefix(rel, "internal/") && !slices.Contains(runtimeInternal, rel) {
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

// streamParts lists the parts of a cluster node's state stream (cluster/stream*.go) and, for
// each, the other parts its fields may hold and its methods take or give. The sender and the
// receiver do not reach into each other: what one asks of the other goes through requests.
// No part reaches into the node (Replicated, node, Local): the stream gets what it uses at
// construction. Each part's methods are in the file that declares it.
var streamParts = map[string][]string{
	"stream":     {"requests", "localShare", "sender", "receiver", "peers", "liveness"},
	"requests":   {},
	"localShare": {},
	"sender":     {"requests", "localShare"},
	"receiver":   {"requests", "peers", "peer"},
	"peers":      {"peer", "share"},
	"peer":       {"share"},
	"share":      {},
	"liveness":   {},
}

func TestStreamParts(t *testing.T) {
	const dir = "cluster"
	guarded := map[string]bool{"Replicated": true, "node": true, "Local": true}
	for part := range streamParts {
		guarded[part] = true
	}
	declared := map[string]string{} // type -> file
	type use struct {
		file, what string
		expr       ast.Expr
	}
	uses := map[string][]use{} // part -> the type expressions of its fields and methods
	fset := token.NewFileSet()
	for _, af := range parseDir(t, fset, dir) {
		f := fset.File(af.Package).Name()
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok {
						continue
					}
					declared[ts.Name.Name] = f
					if st, ok := ts.Type.(*ast.StructType); ok && guarded[ts.Name.Name] {
						for _, fl := range st.Fields.List {
							uses[ts.Name.Name] = append(uses[ts.Name.Name], use{f, "a field", fl.Type})
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil {
					continue
				}
				recv := receiverType(d.Recv.List[0].Type)
				if strings.HasPrefix(filepath.Base(f), "stream") {
					if _, ok := streamParts[recv]; !ok {
						t.Errorf("%s: method %s.%s: %s is not among the stream's parts (streamParts in layers_test.go): say what it may reach",
							f, recv, d.Name.Name, recv)
					}
				}
				if _, ok := streamParts[recv]; !ok {
					continue
				}
				uses[recv] = append(uses[recv], use{f, "method " + d.Name.Name, d.Type})
			}
		}
	}
	for part, allowed := range streamParts {
		file, ok := declared[part]
		if !ok {
			t.Errorf("%s: no type %s: update streamParts in layers_test.go", dir, part)
			continue
		}
		for _, u := range uses[part] {
			if strings.HasPrefix(u.what, "method ") && u.file != file {
				t.Errorf("%s: %s of %s: a part's methods are in the file that declares it (%s)", u.file, u.what, part, file)
			}
			for _, name := range typeNames(u.expr) {
				if !guarded[name] || name == part || slices.Contains(allowed, name) {
					continue
				}
				t.Errorf("%s: %s of %s names %s: the stream's %s may reach only %v of its parts, and nothing of the node",
					u.file, u.what, part, name, part, allowed)
			}
		}
	}
}

// parseDir parses dir's Go files but its tests into fset, in the order of their names.
func parseDir(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no Go files (%v): run the test from the repository root", dir, err)
	}
	var parsed []*ast.File
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, af)
	}
	return parsed
}

// receiverType is the name of a method's receiver type.
func receiverType(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// typeNames lists the names of the package's own types a type expression (a field's type, a
// method's signature) names; another package's (pkg.Type) are not.
func typeNames(e ast.Expr) []string {
	var names []string
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			return false
		case *ast.Field:
			if n.Type != nil {
				names = append(names, typeNames(n.Type)...)
			}
			return false // its names are parameters', not types
		case *ast.Ident:
			names = append(names, n.Name)
		}
		return true
	})
	return names
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
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			imports[strings.Trim(imp.Path.Value, `"`)] = f
		}
	}
	return imports
}

// TestCompositionRoot: cmd/herald's components (its types with start and stop methods) are
// each handed what they use at construction, and only the root builds and starts them. No
// component's field holds another component (only values, small interfaces and funcs: what
// a component started before it gave, a method of one), so that none reads what another's
// start set; and only a component's own methods and constructor (newX of type x) assign its
// fields, so that none pokes another's after construction.
func TestCompositionRoot(t *testing.T) {
	const dir = "cmd/herald"
	fset := token.NewFileSet()
	parsed := parseDir(t, fset, dir)
	structs := map[string]*ast.StructType{}
	methods := map[string]map[string]bool{} // type -> its methods' names
	for _, af := range parsed {
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						if st, ok := ts.Type.(*ast.StructType); ok {
							structs[ts.Name.Name] = st
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil {
					recv := receiverType(d.Recv.List[0].Type)
					if methods[recv] == nil {
						methods[recv] = map[string]bool{}
					}
					methods[recv][d.Name.Name] = true
				}
			}
		}
	}
	components := map[string]bool{}
	fieldOf := map[string][]string{} // field name -> the components that have it
	for name, st := range structs {
		if !methods[name]["start"] || !methods[name]["stop"] {
			continue
		}
		components[name] = true
		for _, fl := range st.Fields.List {
			for _, n := range fl.Names {
				fieldOf[n.Name] = append(fieldOf[n.Name], name)
			}
		}
	}
	if len(components) < 8 {
		t.Fatalf("%s: only %d components (types with start and stop): update TestCompositionRoot", dir, len(components))
	}
	for name := range components {
		for _, fl := range structs[name].Fields.List {
			for _, other := range typeNames(fl.Type) {
				if components[other] && other != name {
					t.Errorf("%s: a field of component %s holds component %s: hand it what %s gives (a value, a small interface, a func) at construction",
						dir, name, other, other)
				}
			}
		}
	}
	for _, af := range parsed {
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			recv, recvType := "", ""
			if fd.Recv != nil && len(fd.Recv.List[0].Names) > 0 {
				recv, recvType = fd.Recv.List[0].Names[0].Name, receiverType(fd.Recv.List[0].Type)
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok {
					return true
				}
				for _, lhs := range as.Lhs {
					root, field := rootField(lhs)
					if root == "" {
						continue
					}
					owners := fieldOf[field]
					if root == recv && slices.Contains(owners, recvType) {
						continue // a component's own method
					}
					ctor := slices.ContainsFunc(owners, func(c string) bool { return strings.EqualFold(fd.Name.Name, "new"+c) })
					if len(owners) > 0 && !ctor {
						t.Errorf("%s: %s assigns %s.%s, a field of component %s: only its own methods and constructor may",
							fset.Position(as.Pos()), fd.Name.Name, root, field, strings.Join(owners, " or "))
					}
				}
				return true
			})
		}
	}
}

// rootField is, for an assignment's left side x.f (or x.f.g...), the variable x and its field f.
func rootField(e ast.Expr) (root, field string) {
	for {
		switch s := e.(type) {
		case *ast.SelectorExpr:
			if id, ok := s.X.(*ast.Ident); ok {
				return id.Name, s.Sel.Name
			}
			e = s.X
		case *ast.IndexExpr:
			e = s.X
		case *ast.StarExpr:
			e = s.X
		case *ast.ParenExpr:
			e = s.X
		default:
			return "", ""
		}
	}
}
