package engine

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The session core stays readable in one sitting: the conductor keeps the
// mailbox and the order of things, and no struct of the session carries
// more than 15 fields; what grows beyond that is a part with a name.
func TestSessionCoreStaysReadableInOneSitting(t *testing.T) {
	src, err := os.ReadFile("conductor.go")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(src, []byte("\n")); n >= 400 {
		t.Errorf("conductor.go has %d lines; keep it under 400 by moving how things are done to the part they change", n)
	}
	fset := token.NewFileSet()
	for _, dir := range []string{".", ".."} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				spec, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				st, ok := spec.Type.(*ast.StructType)
				if !ok {
					return true
				}
				fields := 0
				for _, fl := range st.Fields.List {
					fields += max(len(fl.Names), 1)
				}
				if fields > 15 {
					t.Errorf("%s: struct %s has %d fields; group them into named parts of at most 15", fset.Position(spec.Pos()), spec.Name, fields)
				}
				return true
			})
		}
	}
}
