package netlink

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/sim"
)

// nftDir is the source directory of package nft.
const nftDir = ".."

// enumValues are the values of the enumerations expressions carry, by
// constant name; checklistEnums requires it to name every constant of those
// types that package nft declares.
var enumValues = map[string]map[string]uint64{
	"Field": {
		"FieldSaddr": uint64(nft.FieldSaddr), "FieldDaddr": uint64(nft.FieldDaddr), "FieldL4Proto": uint64(nft.FieldL4Proto),
		"FieldDport": uint64(nft.FieldDport), "FieldSport": uint64(nft.FieldSport),
	},
	"VerdictKind": {
		"Accept": uint64(nft.Accept), "Drop": uint64(nft.Drop), "Return": uint64(nft.Return), "Jump": uint64(nft.Jump), "Goto": uint64(nft.Goto),
	},
	"MarkOp": {"MarkOr": uint64(nft.MarkOr), "MarkXor": uint64(nft.MarkXor)},
	// A bit mask: each constant is a bit some example must set.
	"CtState": {
		"CtInvalid": uint64(nft.CtInvalid), "CtEstablished": uint64(nft.CtEstablished),
		"CtRelated": uint64(nft.CtRelated), "CtNew": uint64(nft.CtNew),
	},
}

// TestChecklist enforces the expression checklist (nft.Examples; see the
// package doc of internal/nft, "Adding an expression"): every type of
// package nft with an isExpr method, and every constant of the enumerations
// expressions carry, appears in an example; and every example, in both
// families, renders, compiles, decompiles from its wire encoding to the same
// rule, and is evaluated by the simulator, matching the example packet.
// TestChecklistKernel is its kernel tier.
func TestChecklist(t *testing.T) {
	pkg := parseNft(t)
	t.Run("every expression type", func(t *testing.T) {
		declared := exprTypes(pkg)
		if len(declared) < 10 {
			t.Fatalf("found only expression types %v: is isExpr still the marker method?", declared)
		}
		shown := map[string]bool{}
		for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			for _, ex := range nft.Examples() {
				for _, e := range ex.Rule(f).Exprs {
					shown[reflect.TypeOf(e).Name()] = true
				}
			}
		}
		for _, n := range declared {
			if !shown[n] {
				t.Errorf("expression type nft.%s has no entry in nft.Examples (see \"Adding an expression\" in internal/nft's doc)", n)
			}
		}
	})
	t.Run("every enumeration constant", func(t *testing.T) {
		checklistEnums(t, pkg)
	})
	seen := map[string]bool{}
	for _, ex := range nft.Examples() {
		if ex.Name == "" || ex.Kernel == "" || ex.Rule == nil || seen[ex.Name] {
			t.Errorf("example %q: needs a unique name, a kernel feature and a rule", ex.Name)
		}
		seen[ex.Name] = true
		for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			t.Run(f.String()+"/"+ex.Name, func(t *testing.T) {
				r := ex.Rule(f)
				if len(r.Exprs) == 0 {
					t.Fatal("empty rule")
				}
				text := r.Render(f)
				if strings.Contains(text, "<") {
					t.Errorf("render: %s", text)
				}
				checkWireRoundTrip(t, f, r)
				checkSimulated(t, f, ex)
			})
		}
	}
}

// parseNft parses the non-test files of package nft (its build has no
// constraints).
func parseNft(t *testing.T) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(nftDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "nft" {
			t.Fatalf("%s: package %s, want nft", p, f.Name.Name)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", nftDir)
	}
	return files
}

// exprTypes returns the names of the types with an isExpr method, sorted.
func exprTypes(pkg []*ast.File) []string {
	var out []string
	for _, file := range pkg {
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Name.Name != "isExpr" || fd.Recv == nil || len(fd.Recv.List) != 1 {
				continue
			}
			rt := fd.Recv.List[0].Type
			if st, ok := rt.(*ast.StarExpr); ok {
				rt = st.X
			}
			if id, ok := rt.(*ast.Ident); ok {
				out = append(out, id.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// checklistEnums requires enumValues to list exactly the constants package
// nft declares of each enumeration type, and the examples to use each.
func checklistEnums(t *testing.T, pkg []*ast.File) {
	declared := map[string][]string{}
	for _, file := range pkg {
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			typ := ""
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				switch {
				case vs.Type != nil:
					typ = ""
					if id, ok := vs.Type.(*ast.Ident); ok {
						typ = id.Name
					}
				case len(vs.Values) > 0:
					typ = "" // an untyped constant
				}
				if _, ok := enumValues[typ]; ok {
					for _, n := range vs.Names {
						declared[typ] = append(declared[typ], n.Name)
					}
				}
			}
		}
	}
	used := map[string]uint64{}
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		for _, ex := range nft.Examples() {
			for _, e := range ex.Rule(f).Exprs {
				collectEnums(reflect.ValueOf(e), used)
			}
		}
	}
	for typ, vals := range enumValues {
		names := declared[typ]
		slices.Sort(names)
		var listed []string
		for n := range vals {
			listed = append(listed, n)
		}
		slices.Sort(listed)
		if d := cmp.Diff(listed, names); d != "" {
			t.Errorf("constants of nft.%s (-listed in enumValues +declared):\n%s", typ, d)
		}
		for n, v := range vals {
			if typ == "CtState" && used[typ]&v == 0 || typ != "CtState" && used[typ+"="+n] == 0 {
				t.Errorf("no example uses nft.%s", n)
			}
		}
	}
}

// collectEnums records the enumeration values inside v: for a bit mask type,
// the union of its values under the type's name; for others, each value under
// "Type=ConstName".
func collectEnums(v reflect.Value, used map[string]uint64) {
	typ := v.Type()
	if vals, ok := enumValues[typ.Name()]; ok && typ.PkgPath() == reflect.TypeOf(nft.Field(0)).PkgPath() {
		x := v.Uint()
		if typ.Name() == "CtState" {
			used[typ.Name()] |= x
			return
		}
		for n, c := range vals {
			if c == x {
				used[typ.Name()+"="+n] = 1
			}
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if typ.Field(i).IsExported() {
				collectEnums(v.Field(i), used)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			collectEnums(v.Index(i), used)
		}
	}
}

// checkWireRoundTrip compiles r, frames it as the kernel sends it back,
// parses and decompiles it: r must come back.
func checkWireRoundTrip(t *testing.T, f ipfamily.Family, r *nft.Rule) {
	t.Helper()
	xs, err := compileRule(nil, f, r)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	back, names, err := parseExprs(f.Proto(), encodeExprs(t, f.Proto(), xs))
	if err != nil || len(names) != len(xs) || back == nil {
		t.Fatalf("parse: %v (%d kernel expressions named, %d compiled)", err, len(names), len(xs))
	}
	got, err := decompile(f, back)
	if err != nil {
		t.Fatalf("decompile: %v", err)
	}
	if d := cmp.Diff(r.Exprs, got, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}, netip.AddrPort{})); d != "" {
		t.Errorf("decompiled (-compiled +decompiled):\n%s", d)
	}
}

// checkSimulated loads the example alone (unguarded) into a fake kernel and
// walks the example packet through it: the simulator must evaluate the rule
// without error and find it matching.
func checkSimulated(t *testing.T, f ipfamily.Family, ex nft.Example) {
	t.Helper()
	ctx := context.Background()
	k := nft.NewFake()
	tx := nft.ExampleTx(f, "checklist", []nft.Example{ex}, false)
	if err := k.Apply(ctx, tx); err != nil {
		t.Fatalf("fake kernel: %v", err)
	}
	tb, err := k.Read(ctx, f, tx.Table)
	if err != nil {
		t.Fatal(err)
	}
	p := nft.ExampleFlowOf(f)
	sc := sim.Context{
		Path:       sim.PathPrerouting,
		InIface:    p.Iif,
		LocalAddrs: []netip.Addr{p.Src.Addr(), p.Dst.Addr()},
		EgressAddr: func(netip.Addr) netip.Addr { return p.Src.Addr().Prev() },
		IfaceAddr: func(name string, fam ipfamily.Family) netip.Addr {
			if name == p.Iif && fam == f {
				return p.Dst.Addr()
			}
			return netip.Addr{}
		},
	}
	if ex.Hook.Hook == "postrouting" {
		sc.LocalAddrs = nil // forwarded, so that it reaches postrouting
	}
	pkt := sim.Packet{Family: f, Proto: p.Proto, Src: p.Src, Dst: p.Dst, Mark: p.Mark, CtState: nft.CtNew}
	res, err := sim.New(nil, tb).Run(sc, pkt)
	if err != nil {
		t.Fatalf("simulate: %v", err)
	}
	for _, s := range res.Trace {
		if s.Table == tx.Table && s.Chain == nft.ExampleRulesChain(ex.Hook) && s.Rule == 0 {
			if s.Action == sim.ActNoMatch {
				t.Errorf("simulator: the example packet does not match: %s", s.Detail)
			}
			return
		}
	}
	t.Errorf("simulator never evaluated the rule; trace: %+v", res.Trace)
}

// TestChecklistKernel commits every example, in both families, to the kernel
// of a throwaway namespace, as Probe lays them out, and reads the table back:
// it must equal what the fake kernel holds (every rule decompiled).
func TestChecklistKernel(t *testing.T) {
	_, c := openNS(t, "nlcheck")
	ctx := testCtx(t)
	var txs []*nft.Tx
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		txs = append(txs, nft.ExampleTx(f, "checklist", nft.Examples(), true))
	}
	if err := c.Apply(ctx, txs...); err != nil {
		t.Fatal(err)
	}
	for _, tx := range txs {
		want, err := applyFake(t, tx).Read(ctx, tx.Family, tx.Table)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Read(ctx, tx.Family, tx.Table)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want.Render(), got.Render()); d != "" {
			t.Errorf("%s: read back (-want +got):\n%s", tx.Family, d)
		}
	}
}
