package events

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"
)

// TestKindsListsEveryDeclaredKind holds Kinds to the Kind constants of
// event.go, read from the source: a constant added without its entry in the
// list fails here, not in a user's scenario.
func TestKindsListsEveryDeclaredKind(t *testing.T) {
	declared := declaredKinds(t, "event.go")
	if len(declared) == 0 {
		t.Fatal("found no Kind constants in event.go")
	}
	if got := Kinds(); !slices.Equal(got, declared) {
		t.Errorf("Kinds() =\n%v\nwant the constants in declaration order:\n%v", got, declared)
	}
}

// declaredKinds returns the values of the constants of type Kind in file.
func declaredKinds(t *testing.T, file string) []Kind {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []Kind
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			if typ, ok := vs.Type.(*ast.Ident); !ok || typ.Name != "Kind" {
				continue
			}
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("constant %s is not a string literal", name.Name)
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, Kind(v))
			}
		}
	}
	return out
}

func TestKnownTellsDeclaredKindsFromOthers(t *testing.T) {
	for _, k := range Kinds() {
		if !k.Known() {
			t.Errorf("%q.Known() = false for a listed kind", k)
		}
	}
	for _, k := range []Kind{"", "tool_complete", "barge_in_confirm", "Transcript"} {
		if k.Known() {
			t.Errorf("%q.Known() = true, want false", k)
		}
	}
}

func TestKindsReturnsACopy(t *testing.T) {
	Kinds()[0] = "changed"
	if Kinds()[0] != SessionStarted {
		t.Error("changing the slice Kinds returned changed the list")
	}
}
