package iptables

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/nft"
)

// Translation of iptables tables into nf_tables tables the packet simulator
// (internal/nft/sim) runs with the same meaning, for the tracer. Each
// iptables rule becomes one nft.Rule in the same chain at the same index
// (iptables-nft stores it so, which is how the kernel's trace events, which
// name a rule by its handle, map back to the rule), with the rule's text as
// its Source ("-A CHAIN SPEC": the trace prints kube-proxy's own rule) and
// its comment. Built-in chains become base chains at iptables' priorities
// (nat: dstnat -100 at prerouting and output, srcnat 100 at input and
// postrouting; filter: 0); user chains are regular chains.
//
// The translation knows the matches and targets this plane renders and a
// few common ones more, each as the kernel runs it:
//
//	-s, -d [!] ADDR[/LEN]          address match
//	-p tcp|udp|sctp                protocol match
//	-i [!] NAME[+]                 input interface (+: name prefix)
//	-m tcp|udp|sctp --dport/--sport N
//	-m comment --comment TEXT      the rule's comment
//	-m addrtype --dst-type/--src-type LOCAL
//	-m mark [!] --mark V[/M]
//	-m conntrack --ctstate S[,S]
//	-m statistic --mode random --probability P
//	                               P must be 1/n for an integer n (to the
//	                               kernel's precision, 2^-31): a random
//	                               branch of probability 1/n, so a
//	                               cascade of 1/(n-i) gives each endpoint
//	                               exactly 1/n, as the nftables plane's
//	                               numgen does
//	-m recent --rcheck --seconds S --name L / --set --name L
//	                               (--rsource, full mask): the list L as a
//	                               dynamic set of source addresses with
//	                               timeout S (ClientIP affinity)
//	-j ACCEPT|DROP|RETURN|CHAIN, -g CHAIN
//	-j REJECT [--reject-with icmp-port-unreachable|icmp6-port-unreachable|tcp-reset]
//	-j DNAT --to-destination ADDR[:PORT]
//	-j MASQUERADE [--random-fully]
//	-j MARK --or-mark V, --xor-mark V, --set-xmark V/V (or), V/0 (xor)
//
// Anything else (another match or target, an option of a known one the
// simulator cannot weigh, a negation it cannot express) is an error naming
// the table, the chain and the rule: the tracer never skips a rule it does
// not understand, since the rule may decide the packet's fate. A kernel
// read-back holding another program's rules (Docker, a CNI plugin's
// portmap) therefore explains as far as those rules are among the above,
// and otherwise fails with the rule it cannot explain. A built-in chain
// whose policy is DROP ends with a translated drop rule (the simulator's
// base chains accept at their end).

// builtinHooks maps each built-in chain of a table to its hook and priority
// (iptables-nft registers them so; iptables-legacy's hooks run at the same
// priorities).
var builtinHooks = map[string]map[string]nft.Hook{
	TableNAT: {
		"PREROUTING":  {Type: "nat", Hook: "prerouting", Priority: -100},
		"INPUT":       {Type: "nat", Hook: "input", Priority: 100},
		"OUTPUT":      {Type: "nat", Hook: "output", Priority: -100},
		"POSTROUTING": {Type: "nat", Hook: "postrouting", Priority: 100},
	},
	TableFilter: {
		"INPUT":   {Type: "filter", Hook: "input", Priority: 0},
		"FORWARD": {Type: "filter", Hook: "forward", Priority: 0},
		"OUTPUT":  {Type: "filter", Hook: "output", Priority: 0},
	},
}

// TranslatedTables are the iptables tables Translate takes: the two this
// plane programs.
var TranslatedTables = []string{TableFilter, TableNAT}

// Translate returns the nat and filter tables of family f (as
// internal/iptables.ParseSave reads iptables-save's output, or as
// RenderTables builds them) as nf_tables tables, in the order of
// TranslatedTables; tables absent from tables are left out. See the
// translation's contract above.
func Translate(f ipfamily.Family, tables map[string]*ipt.Table) ([]*nft.Table, error) {
	var out []*nft.Table
	for _, name := range TranslatedTables {
		t := tables[name]
		if t == nil {
			continue
		}
		nt, err := translateTable(f, t)
		if err != nil {
			return nil, err
		}
		out = append(out, nt)
	}
	return out, nil
}

func translateTable(f ipfamily.Family, t *ipt.Table) (*nft.Table, error) {
	tr := &translator{fam: f, table: t, out: nft.NewTable(f, t.Name), timeouts: map[string]time.Duration{}}
	hooks := builtinHooks[t.Name]
	for _, name := range t.ChainNames() {
		c := t.Chains[name]
		nc := &nft.Chain{Name: name}
		if h, ok := hooks[name]; ok {
			nc.Hook = &h
		} else if ipt.IsBuiltin(t.Name, name) {
			return nil, fmt.Errorf("table %s: built-in chain %s: not translated", t.Name, name)
		}
		for i, spec := range c.Rules {
			r, err := tr.rule(name, spec)
			if err != nil {
				return nil, fmt.Errorf("%s table %s chain %s rule %d %q: %w", Name, t.Name, name, i, "-A "+name+" "+spec, err)
			}
			nc.Rules = append(nc.Rules, r)
		}
		switch c.Policy {
		case "-", "", "ACCEPT":
		case "DROP":
			if nc.Hook == nil {
				return nil, fmt.Errorf("table %s: chain %s: a policy on a user chain", t.Name, name)
			}
			nc.Rules = append(nc.Rules, &nft.Rule{Exprs: []nft.Expr{nft.Verdict{Kind: nft.Drop}}, Source: policySource(name, c.Policy)})
		default:
			return nil, fmt.Errorf("table %s: chain %s: policy %s not translated", t.Name, name, c.Policy)
		}
		tr.out.Chains[name] = nc
	}
	for _, name := range slices.Sorted(maps.Keys(tr.timeouts)) {
		tr.out.Sets[name] = &nft.Set{Name: name, Key: []nft.Field{nft.FieldSaddr}, Timeout: tr.timeouts[name],
			Comment: "xt_recent list " + name, Elements: map[string]nft.Element{}}
	}
	return tr.out, nil
}

// translator translates one table's rules.
type translator struct {
	fam   ipfamily.Family
	table *ipt.Table
	out   *nft.Table
	// timeouts are the xt_recent lists met, with the longest --seconds a
	// check gives (0 when only --set: the entries do not expire).
	timeouts map[string]time.Duration
}

// ruleParse is one rule as it is read: the header matches (iptables
// evaluates -s, -d, -p, -i before any -m match), the matches of -m modules
// in order, and the target.
type ruleParse struct {
	header, matches []nft.Expr
	comment         string
	target          []nft.Expr
	proto           uint8
}

// rule translates one rule spec of chain.
func (tr *translator) rule(chain, spec string) (*nft.Rule, error) {
	w, err := Words(spec)
	if err != nil {
		return nil, err
	}
	p := &ruleParse{}
	module := ""
	var rec *recent
	for i := 0; i < len(w); i++ {
		neg := false
		if w[i] == "!" {
			neg = true
			i++
			if i == len(w) {
				return nil, fmt.Errorf("nothing follows the last negation")
			}
		}
		opt := w[i]
		arg := func() (string, error) {
			if i+1 >= len(w) {
				return "", fmt.Errorf("%s without a value", opt)
			}
			i++
			return w[i], nil
		}
		v := ""
		if opt != "-m" && opt != "--match" && opt != "--rsource" && opt != "--reap" && opt != "--set" && opt != "--rcheck" && opt != "--random-fully" {
			if v, err = arg(); err != nil {
				return nil, err
			}
		}
		switch opt {
		case "-m", "--match":
			if rec != nil {
				if err := tr.recentDone(rec, p); err != nil {
					return nil, err
				}
				rec = nil
			}
			if module, err = arg(); err != nil {
				return nil, err
			}
			switch module {
			case "comment", "tcp", "udp", "sctp", "addrtype", "mark", "conntrack", "statistic":
			case "recent":
				rec = &recent{}
			default:
				return nil, fmt.Errorf("match -m %s: not translated", module)
			}
			if neg {
				return nil, fmt.Errorf("! -m %s: not translated", module)
			}
			continue
		case "-s", "--source", "-d", "--destination":
			pfx, err := addrPrefix(tr.fam, v)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", opt, v, err)
			}
			fld := nft.FieldSaddr
			if opt == "-d" || opt == "--destination" {
				fld = nft.FieldDaddr
			}
			p.header = append(p.header, nft.AddrMatch{Field: fld, Neq: neg, Prefix: pfx})
			continue
		case "-p", "--protocol":
			n, ok := nft.ProtoNumber(v)
			if !ok || neg {
				return nil, fmt.Errorf("%s%s %s: not translated (tcp, udp or sctp)", bang(neg), opt, v)
			}
			p.proto = n
			p.header = append(p.header, nft.ProtoMatch{Proto: n})
			continue
		case "-i", "--in-interface":
			name, prefix := strings.CutSuffix(v, "+")
			if name == "" || len(name) >= nft.IfNameSize {
				return nil, fmt.Errorf("%s %q: not translated", opt, v)
			}
			p.header = append(p.header, nft.IifnameMatch{Name: name, Prefix: prefix, Neq: neg})
			continue
		case "-j", "--jump", "-g", "--goto":
			if neg {
				return nil, fmt.Errorf("! %s", opt)
			}
			if rec != nil {
				if err := tr.recentDone(rec, p); err != nil {
					return nil, err
				}
				rec = nil
			}
			t, err := tr.target(opt == "-g" || opt == "--goto", v, w[i+1:], p)
			if err != nil {
				return nil, err
			}
			p.target = t
			i = len(w)
			continue
		}
		if err := tr.moduleOption(module, opt, v, neg, p, rec); err != nil {
			return nil, err
		}
	}
	if rec != nil {
		if err := tr.recentDone(rec, p); err != nil {
			return nil, err
		}
	}
	r := &nft.Rule{Exprs: append(append(p.header, p.matches...), p.target...), Comment: p.comment, Source: "-A " + chain + " " + spec}
	return r, nil
}

func bang(neg bool) string {
	if neg {
		return "! "
	}
	return ""
}

// policySource is the Source of the rule that stands for a built-in chain's
// policy: it starts with ":", as the chain's line in iptables-save does.
func policySource(chain, policy string) string {
	return ":" + chain + " " + policy + " (the chain's policy)"
}
