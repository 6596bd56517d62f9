package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// Naming rules (one rule for type, enum, enum value and field names):
//
//   - A schema name is split into words where a lower-case letter or digit is
//     followed by an upper-case letter ("BrowsePathTarget" → Browse, Path, Target).
//   - The words Id, Ids, Uri, Uris, Url and Urls become ID, IDs, URI, URIs, URL and
//     URLs ("NodeId" → NodeID, "ServerUris" → ServerURIs, "IdType" → IDType); words
//     merely starting with those letters ("Identity", "Urgent") are left alone.
//   - Everything else, underscores included, is kept as it is.
//   - Enum constants are the Go enum name followed by the Go value name
//     (MessageSecurityModeSignAndEncrypt).
//   - A field whose Go name would be a method of its type (the four
//     DataTypeDescription types' DataTypeId vs. DataTypeID()) keeps its schema
//     spelling.
//   - Node id constants are ID_ followed by the NodeIds.csv name unchanged
//     (ID_Server_ServerStatus_State). The underscore keeps them apart from the
//     hand-written IDType constants: "ID"+"String" would be IDString.
//
// The generator fails when two generated names, or a generated and a hand-written
// one, collide.

var initialisms = map[string]string{
	"Id": "ID", "Ids": "IDs", "Uri": "URI", "Uris": "URIs", "Url": "URL", "Urls": "URLs",
}

// goName converts a schema name by the rules above.
func goName(s string) string {
	var b strings.Builder
	start := 0
	rs := []rune(s)
	flush := func(end int) {
		w := string(rs[start:end])
		if r, ok := initialisms[w]; ok {
			w = r
		}
		b.WriteString(w)
		start = end
	}
	for i := 1; i < len(rs); i++ {
		prev, cur := rs[i-1], rs[i]
		if (unicode.IsLower(prev) || unicode.IsDigit(prev)) && unicode.IsUpper(cur) {
			flush(i)
		}
	}
	flush(len(rs))
	return b.String()
}

// nodeIDConst is the Go constant of a NodeIds.csv name.
func nodeIDConst(name string) string { return "ID_" + name }

// handWrittenNames returns the package-level names declared in the hand-written
// (neither generated nor test) Go files of dir.
func handWrittenNames(dir string) (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		base := filepath.Base(path)
		if strings.HasSuffix(base, "_gen.go") || strings.HasSuffix(base, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = base
				} else if t := recvType(d.Recv.List[0].Type); t != "" {
					names[t+"."+d.Name.Name] = base
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch sp := spec.(type) {
					case *ast.TypeSpec:
						names[sp.Name.Name] = base
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							names[n.Name] = base
						}
					}
				}
			}
		}
	}
	return names, nil
}

func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvType(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return recvType(t.X)
	}
	return ""
}
