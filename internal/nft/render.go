package nft

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// Render returns the table in nft(8) syntax, as `nft list table` prints it
// (nft 1.0.6 cannot read back quoted chain names, so a table with such names is
// for reading, not for `nft -f`): sets first, then chains, each sorted by
// name; elements sorted by key.
func (t *Table) Render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s %s {\n", Keyword(t.Family), t.Name)
	first := true
	sep := func() {
		if !first {
			b.WriteString("\n")
		}
		first = false
	}
	for _, n := range t.SetNames() {
		sep()
		t.Sets[n].render(&b, t.Family)
	}
	for _, n := range t.ChainNames() {
		sep()
		t.Chains[n].render(&b, t.Family)
	}
	b.WriteString("}\n")
	return b.String()
}

func (s *Set) render(b *strings.Builder, f ipfamily.Family) {
	kind := "set"
	if s.Verdict {
		kind = "map"
	}
	fmt.Fprintf(b, "\t%s %s {\n", kind, quoteName(s.Name))
	fmt.Fprintf(b, "\t\ttype %s", keyType(f, s.Key))
	if s.Verdict {
		b.WriteString(" : verdict")
	}
	b.WriteString("\n")
	if s.Timeout > 0 {
		b.WriteString("\t\tflags dynamic,timeout\n")
		fmt.Fprintf(b, "\t\ttimeout %s\n", renderDuration(s.Timeout))
	}
	if s.Comment != "" {
		fmt.Fprintf(b, "\t\tcomment %s\n", strconv.Quote(s.Comment))
	}
	if len(s.Elements) > 0 {
		keys := sortedKeys(s.Elements)
		b.WriteString("\t\telements = { ")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",\n\t\t\t     ")
			}
			b.WriteString(k)
			if e := s.Elements[k]; e.Verdict != nil {
				b.WriteString(" : ")
				b.WriteString(e.Verdict.String())
			}
		}
		b.WriteString(" }\n")
	}
	b.WriteString("\t}\n")
}

func (c *Chain) render(b *strings.Builder, f ipfamily.Family) {
	fmt.Fprintf(b, "\tchain %s {\n", quoteName(c.Name))
	if c.Hook != nil {
		fmt.Fprintf(b, "\t\ttype %s hook %s priority %s; policy accept;\n", c.Hook.Type, c.Hook.Hook, priorityName(c.Hook))
	}
	for _, r := range c.Rules {
		b.WriteString("\t\t")
		b.WriteString(r.Render(f))
		b.WriteString("\n")
	}
	b.WriteString("\t}\n")
}

// Render returns the rule in nft syntax for a table of family f.
func (r *Rule) Render(f ipfamily.Family) string {
	parts := make([]string, 0, len(r.Exprs)+1)
	for _, e := range r.Exprs {
		parts = append(parts, RenderExpr(f, e))
	}
	if r.Comment != "" {
		parts = append(parts, "comment "+strconv.Quote(r.Comment))
	}
	return strings.Join(parts, " ")
}

// RenderExpr returns one expression in nft syntax for a table of family f.
func RenderExpr(f ipfamily.Family, e Expr) string {
	switch e := e.(type) {
	case AddrMatch:
		return fieldName(f, e.Field) + neq(e.Neq) + renderPrefix(e.Prefix)
	case ProtoMatch:
		return "meta l4proto " + protoName(e.Proto)
	case PortMatch:
		return fieldName(f, e.Field) + " " + strconv.Itoa(int(e.Port))
	case CtStateMatch:
		return "ct state " + ctStateNames(e.States)
	case FibLocal:
		if e.Saddr {
			return "fib saddr type local"
		}
		return "fib daddr type local"
	case IifnameMatch:
		name := e.Name
		if e.Prefix {
			name += "*"
		}
		return "iifname" + neq(e.Neq) + strconv.Quote(name)
	case MarkMatch:
		op := " == "
		if e.Neq {
			op = " != "
		}
		return fmt.Sprintf("meta mark & 0x%08x%s0x%08x", e.Mask, op, e.Value)
	case Random:
		return fmt.Sprintf("numgen random mod %d %d", e.Mod, e.Value)
	case Lookup:
		return fieldList(f, e.Fields) + neq(e.Neq) + "@" + quoteName(e.Set)
	case VMap:
		return fieldList(f, e.Fields) + " vmap @" + quoteName(e.Map)
	case Verdict:
		return e.String()
	case DNAT:
		if e.To.Addr().Is6() {
			return fmt.Sprintf("dnat to [%s]:%d", e.To.Addr(), e.To.Port())
		}
		return "dnat to " + e.To.String()
	case Redirect:
		return "redirect to :" + strconv.Itoa(int(e.Port))
	case Masquerade:
		if e.FullyRandom {
			return "masquerade fully-random"
		}
		return "masquerade"
	case SetMark:
		op := "|"
		if e.Op == MarkXor {
			op = "^"
		}
		return fmt.Sprintf("meta mark set meta mark %s 0x%08x", op, e.Value)
	case SetNftrace:
		return "meta nftrace set 1"
	case Reject:
		if e.TCPReset {
			return "reject with tcp reset"
		}
		return "reject"
	case Update:
		return "update @" + quoteName(e.Set) + " { " + fieldList(f, e.Fields) + " }"
	case Counter:
		return "counter"
	}
	return fmt.Sprintf("<unknown %T>", e)
}

// String returns the verdict in nft syntax.
func (v Verdict) String() string {
	switch v.Kind {
	case Accept:
		return "accept"
	case Drop:
		return "drop"
	case Return:
		return "return"
	case Jump:
		return "jump " + quoteName(v.Chain)
	case Goto:
		return "goto " + quoteName(v.Chain)
	}
	return "<bad verdict>"
}

func neq(n bool) string {
	if n {
		return " != "
	}
	return " "
}

func fieldName(f ipfamily.Family, fld Field) string {
	switch fld {
	case FieldSaddr:
		return Keyword(f) + " saddr"
	case FieldDaddr:
		return Keyword(f) + " daddr"
	case FieldL4Proto:
		return "meta l4proto"
	case FieldDport:
		return "th dport"
	case FieldSport:
		return "th sport"
	}
	return "<bad field>"
}

func fieldList(f ipfamily.Family, fs []Field) string {
	parts := make([]string, len(fs))
	for i, fld := range fs {
		parts[i] = fieldName(f, fld)
	}
	return strings.Join(parts, " . ")
}

func keyType(f ipfamily.Family, fs []Field) string {
	parts := make([]string, len(fs))
	for i, fld := range fs {
		switch fld {
		case FieldSaddr, FieldDaddr:
			parts[i] = addrType(f)
		case FieldL4Proto:
			parts[i] = "inet_proto"
		case FieldDport, FieldSport:
			parts[i] = "inet_service"
		default:
			parts[i] = "<bad field>"
		}
	}
	return strings.Join(parts, " . ")
}

func renderValue(fld Field, v Value) string {
	switch fld {
	case FieldSaddr, FieldDaddr:
		return v.Addr.String()
	case FieldL4Proto:
		return protoName(uint8(v.Num))
	}
	return strconv.FormatUint(uint64(v.Num), 10)
}

func renderPrefix(p netip.Prefix) string {
	p = p.Masked() // the kernel stores prefixes masked
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.String()
}

func protoName(p uint8) string {
	if n, ok := ProtoName(p); ok {
		return n
	}
	return strconv.Itoa(int(p))
}

func ctStateNames(s CtState) string {
	var names []string
	for _, x := range []struct {
		bit  CtState
		name string
	}{{CtInvalid, "invalid"}, {CtEstablished, "established"}, {CtRelated, "related"}, {CtNew, "new"}} {
		if s&x.bit != 0 {
			names = append(names, x.name)
		}
	}
	return strings.Join(names, ",")
}

// priorityName prints a hook priority as nft lists it.
func priorityName(h *Hook) string {
	if h.Type == "nat" {
		switch {
		case h.Priority == -100 && h.Hook == "prerouting":
			return "dstnat"
		case h.Priority == 100 && (h.Hook == "postrouting" || h.Hook == "input"):
			return "srcnat"
		}
	}
	if h.Type == "filter" && h.Priority == 0 {
		return "filter"
	}
	return strconv.Itoa(h.Priority)
}

// renderDuration prints a timeout as nft does: 3h, 10800s → "3h", 90s → "1m30s".
func renderDuration(d time.Duration) string {
	s := int64(d / time.Second)
	if s == 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range []struct {
		n    int64
		unit string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}} {
		if s >= u.n {
			fmt.Fprintf(&b, "%d%s", s/u.n, u.unit)
			s %= u.n
		}
	}
	return b.String()
}

// quoteName quotes a chain or set name when nft needs quotes for it.
func quoteName(n string) string {
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return strconv.Quote(n)
		}
	}
	return n
}
