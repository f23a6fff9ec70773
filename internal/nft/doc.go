// Package nft is svcnet's model of an nftables table: tables, chains, rules,
// named sets and verdict maps, with exactly the small vocabulary of matches and
// statements the service proxy emits. It renders to nft(8) syntax (golden files,
// `nft -f`, humans), describes changes as atomic transactions (Tx), applies them
// to a state-tracking in-memory kernel (Fake), and is the input of the packet
// simulator and the tracer. The netlink backend (subpackage netlink) compiles it
// to kernel expressions and reads the kernel's table back into it.
//
// Contract: the model is pure data. Rendering is deterministic: chains, sets and
// elements are printed sorted by name or key, so the same table always renders
// to the same bytes.
//
// # Kernel features
//
// Probe commits every expression svcnet emits (Examples, or the part a
// component uses: ExamplesFor) to a scratch table per family and deletes it
// again, so that a kernel without a feature (a module not built, a kernel too
// old) fails at start-up with an error that names it and wraps
// ErrNotSupported, rather than deep in the first sync. The whole checklist in
// both families costs two batches, about 0.6 ms.
//
// # Adding an expression
//
// The vocabulary is closed: every layer handles every expression, and one
// list, Examples, names them all. To add an expression (or a new form of one,
// or a new Field, VerdictKind, MarkOp or CtState value):
//
//  1. expr.go: the type, with the isExpr marker method (and a constructor if
//     it reads better);
//  2. render.go: RenderExpr prints it in nft(8) syntax, as `nft list` does;
//  3. netlink/compile.go: compileExpr emits the kernel expressions nft(8)
//     emits for that text (check with `nft --debug=netlink`; TestCompilesLikeNft);
//  4. netlink/decompile.go: the decoder recognises exactly those expressions
//     (newExpr knows every kernel expression name it uses) and gives the
//     value back; anything else stays unrecognised;
//  5. sim/rule.go: evalRule evaluates it as the kernel does;
//  6. fake.go: checkRule and the reference checks, if it names a chain or set;
//  7. checklist.go: an Example per form, with the kernel feature (module) it
//     needs and the hook it must sit behind; its rule matches ExampleFlowOf's
//     packet and ends with the new expression.
//
// netlink.TestChecklist enforces this: it reads this package's source and
// fails for a type with an isExpr method, or an enumeration constant, that no
// example uses; and it pushes every example through Render, compile, wire
// parse and decompile (the same rule must come back) and the simulator (the
// rule must be evaluated and match the example packet).
// netlink.TestChecklistKernel commits every example to a real kernel and
// reads it back equal; the Probe tests check what a refusal reports.
package nft
