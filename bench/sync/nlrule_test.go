package syncbench

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func cstr(s string) []byte { return append([]byte(s), 0) }

// expr encodes one rule expression: NFTA_LIST_ELEM { NAME, DATA { attrs } }.
func expr(name string, attrs ...[]byte) []byte {
	return nested(unix.NFTA_LIST_ELEM, attr(unix.NFTA_EXPR_NAME, cstr(name)), nested(unix.NFTA_EXPR_DATA, attrs...))
}

func payloadLoad(reg, base, off, n uint32) []byte {
	return expr("payload", attr(unix.NFTA_PAYLOAD_DREG, be32(reg)), attr(unix.NFTA_PAYLOAD_BASE, be32(base)),
		attr(unix.NFTA_PAYLOAD_OFFSET, be32(off)), attr(unix.NFTA_PAYLOAD_LEN, be32(n)))
}

func cmpEq(reg uint32, v []byte) []byte {
	return expr("cmp", attr(unix.NFTA_CMP_SREG, be32(reg)), attr(unix.NFTA_CMP_OP, be32(unix.NFT_CMP_EQ)),
		nested(unix.NFTA_CMP_DATA, attr(unix.NFTA_DATA_VALUE, v)))
}

func metaL4proto(reg uint32) []byte {
	return expr("meta", attr(unix.NFTA_META_KEY, be32(unix.NFT_META_L4PROTO)), attr(unix.NFTA_META_DREG, be32(reg)))
}

func verdict(code int32, chain string) []byte {
	v := [][]byte{attr(unix.NFTA_VERDICT_CODE, be32(uint32(code)))}
	if chain != "" {
		v = append(v, attr(unix.NFTA_VERDICT_CHAIN, cstr(chain)))
	}
	return expr("immediate", attr(unix.NFTA_IMMEDIATE_DREG, be32(0)),
		nested(unix.NFTA_IMMEDIATE_DATA, nested(unix.NFTA_DATA_VERDICT, v...)))
}

// newRuleMsg encodes a NEWRULE notification as the kernel sends it.
func newRuleMsg(family uint8, table, chain string, exprs ...[]byte) []byte {
	p := []byte{family, 0, 0, 0}
	p = append(p, attr(unix.NFTA_RULE_TABLE, cstr(table))...)
	p = append(p, attr(unix.NFTA_RULE_CHAIN, cstr(chain))...)
	p = append(p, attr(unix.NFTA_RULE_HANDLE, binary.BigEndian.AppendUint64(nil, 3))...)
	p = append(p, nested(unix.NFTA_RULE_EXPRESSIONS, exprs...)...)
	return nlmsg(newRuleTy, p)
}

const (
	nh = unix.NFT_PAYLOAD_NETWORK_HEADER
	th = unix.NFT_PAYLOAD_TRANSPORT_HEADER
)

func ip4(s string) []byte { return netip.MustParseAddr(s).AsSlice() }

// kubeServicesRule is what iptables-nft 1.8.9 makes of
// `-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment … -m tcp --dport 80 -j KUBE-SVC-ABC`
// (`nft --debug=netlink list chain ip nat KUBE-SERVICES`): l4proto into reg 1,
// then the address into the same register, an xt comment match, the port, a
// counter, the jump.
func kubeServicesRule(ip string, port uint16, target string) []byte {
	return newRuleMsg(unix.NFPROTO_IPV4, "nat", "KUBE-SERVICES",
		metaL4proto(1), cmpEq(1, []byte{unix.IPPROTO_TCP}),
		payloadLoad(1, nh, 16, 4), cmpEq(1, ip4(ip)),
		expr("match", attr(unix.NFTA_MATCH_NAME, cstr("comment")), attr(unix.NFTA_MATCH_REV, be32(0))),
		payloadLoad(1, th, 2, 2), cmpEq(1, binary.BigEndian.AppendUint16(nil, port)),
		expr("counter"),
		verdict(unix.NFT_JUMP, target))
}

func TestParseNewRule(t *testing.T) {
	v6 := netip.MustParseAddr("fd00:96::a")
	for _, tc := range []struct {
		name     string
		msg      []byte
		want     RuleEvent
		frontend bool
	}{{
		name: "ClusterIP rule of iptables-nft",
		msg:  kubeServicesRule("10.96.0.10", 80, "KUBE-SVC-ABC"),
		want: RuleEvent{Family: unix.NFPROTO_IPV4, Table: "nat", Chain: "KUBE-SERVICES",
			Daddr: netip.MustParseAddr("10.96.0.10"), Dport: 80, Jump: "KUBE-SVC-ABC"},
		frontend: true,
	}, {
		name: "kube-proxy's order: port before address, goto",
		msg: newRuleMsg(unix.NFPROTO_IPV4, "nat", "KUBE-SERVICES",
			payloadLoad(1, th, 2, 2), cmpEq(1, []byte{0x1f, 0x90}),
			payloadLoad(2, nh, 16, 4), cmpEq(2, ip4("10.96.3.4")),
			verdict(unix.NFT_GOTO, "KUBE-SVL-XYZ")),
		want: RuleEvent{Family: unix.NFPROTO_IPV4, Table: "nat", Chain: "KUBE-SERVICES",
			Daddr: netip.MustParseAddr("10.96.3.4"), Dport: 8080, Jump: "KUBE-SVL-XYZ"},
		frontend: true,
	}, {
		name: "ip6tables-nft",
		msg: newRuleMsg(unix.NFPROTO_IPV6, "nat", "KUBE-SERVICES",
			payloadLoad(1, nh, 24, 16), cmpEq(1, v6.AsSlice()), payloadLoad(1, th, 2, 2), cmpEq(1, []byte{0, 53}),
			verdict(unix.NFT_JUMP, "KUBE-SVC-V6")),
		want:     RuleEvent{Family: unix.NFPROTO_IPV6, Table: "nat", Chain: "KUBE-SERVICES", Daddr: v6, Dport: 53, Jump: "KUBE-SVC-V6"},
		frontend: true,
	}, {
		name: "svcnet's last rule: a node address, no port, to KUBE-NODEPORTS",
		msg: newRuleMsg(unix.NFPROTO_IPV4, "nat", "KUBE-SERVICES",
			payloadLoad(1, nh, 16, 4), cmpEq(1, ip4("172.26.236.177")), expr("match", attr(unix.NFTA_MATCH_NAME, cstr("comment"))),
			expr("counter"), verdict(unix.NFT_JUMP, "KUBE-NODEPORTS")),
		want: RuleEvent{Family: unix.NFPROTO_IPV4, Table: "nat", Chain: "KUBE-SERVICES",
			Daddr: netip.MustParseAddr("172.26.236.177"), Jump: "KUBE-NODEPORTS"},
	}, {
		name: "masked address (-d 10.96.0.0/16): a bitwise overwrites the register",
		msg: newRuleMsg(unix.NFPROTO_IPV4, "nat", "KUBE-SERVICES",
			payloadLoad(1, nh, 16, 4),
			expr("bitwise", attr(unix.NFTA_BITWISE_SREG, be32(1)), attr(unix.NFTA_BITWISE_DREG, be32(1))),
			cmpEq(1, ip4("10.96.0.0")), verdict(unix.NFT_JUMP, "KUBE-SVC-NET")),
		want: RuleEvent{Family: unix.NFPROTO_IPV4, Table: "nat", Chain: "KUBE-SERVICES", Jump: "KUBE-SVC-NET"},
	}, {
		name: "source address, not destination",
		msg: newRuleMsg(unix.NFPROTO_IPV4, "nat", "KUBE-SERVICES",
			payloadLoad(1, nh, 12, 4), cmpEq(1, ip4("10.96.0.5")), verdict(unix.NFT_JUMP, "KUBE-MARK-MASQ")),
		want: RuleEvent{Family: unix.NFPROTO_IPV4, Table: "nat", Chain: "KUBE-SERVICES", Jump: "KUBE-MARK-MASQ"},
	}, {
		name: "address loaded, register reused by meta before the cmp",
		msg: newRuleMsg(unix.NFPROTO_IPV4, "nat", "KUBE-SERVICES",
			payloadLoad(1, nh, 16, 4), metaL4proto(1), cmpEq(1, []byte{6, 0, 0, 0}), verdict(unix.NFT_JUMP, "KUBE-SVC-A")),
		want: RuleEvent{Family: unix.NFPROTO_IPV4, Table: "nat", Chain: "KUBE-SERVICES", Jump: "KUBE-SVC-A"},
	}, {
		name: "no jump: a terminal verdict",
		msg: newRuleMsg(unix.NFPROTO_IPV4, "filter", "KUBE-SERVICES",
			payloadLoad(1, nh, 16, 4), cmpEq(1, ip4("10.96.0.20")), verdict(0, "")),
		want: RuleEvent{Family: unix.NFPROTO_IPV4, Table: "filter", Chain: "KUBE-SERVICES", Daddr: netip.MustParseAddr("10.96.0.20")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var got []RuleEvent
			if err := parseDatagram(tc.msg, nil, func(ev RuleEvent) { got = append(got, ev) }); err != nil {
				t.Fatalf("parseDatagram: %v", err)
			}
			if len(got) != 1 {
				t.Fatalf("got %d events, want 1: %+v", len(got), got)
			}
			if got[0] != tc.want {
				t.Errorf("event = %+v\nwant    %+v", got[0], tc.want)
			}
			if got[0].Frontend() != tc.frontend {
				t.Errorf("Frontend() = %v, want %v", got[0].Frontend(), tc.frontend)
			}
		})
	}
}

// A datagram of a transaction mixes kinds; each callback gets its own, and a
// nil callback leaves its kind alone.
func TestParseDatagramRulesAndElements(t *testing.T) {
	var dgram []byte
	dgram = append(dgram, kubeServicesRule("10.96.0.10", 80, "KUBE-SVC-A")...)
	dgram = append(dgram, newSetElemMsg(unix.NFPROTO_IPV4, "svcnet", "service-ips", ipProtoPort("10.96.0.5", unix.IPPROTO_TCP, 80))...)
	dgram = append(dgram, kubeServicesRule("10.96.0.11", 443, "KUBE-SVC-B")...)
	var rules []netip.Addr
	elems := 0
	err := parseDatagram(dgram, func(ElemEvent) { elems++ }, func(ev RuleEvent) { rules = append(rules, ev.Daddr) })
	if err != nil {
		t.Fatalf("parseDatagram: %v", err)
	}
	if elems != 1 || len(rules) != 2 || rules[0] != netip.MustParseAddr("10.96.0.10") || rules[1] != netip.MustParseAddr("10.96.0.11") {
		t.Errorf("elements %d, rules %v; want 1 and [10.96.0.10 10.96.0.11]", elems, rules)
	}
	rules = nil
	if err := parseDatagram(dgram, func(ElemEvent) {}, nil); err != nil || rules != nil {
		t.Errorf("rules without a callback: %v, %v", rules, err)
	}
}

func TestParseNewRuleMalformed(t *testing.T) {
	msg := kubeServicesRule("10.96.0.10", 80, "KUBE-SVC-A")
	// The expressions attribute claims more bytes than the message has: it is
	// the last attribute, after the 4-byte nfgenmsg and table, chain, handle.
	off := nlmsgHdrLen + nfgenHdrLen + align4(nlaHdrLen+len("nat")+1) + align4(nlaHdrLen+len("KUBE-SERVICES")+1) + nlaHdrLen + 8
	bad := append([]byte{}, msg...)
	if typ := binary.NativeEndian.Uint16(bad[off+2:]) & nlaTypeMask; typ != unix.NFTA_RULE_EXPRESSIONS {
		t.Fatalf("attribute at %d is %d, want the expressions", off, typ)
	}
	binary.NativeEndian.PutUint16(bad[off:], 0xfff0)
	if err := parseDatagram(bad, nil, func(RuleEvent) {}); !errors.Is(err, errShort) {
		t.Errorf("oversized expressions: err = %v, want errShort", err)
	}
	if err := parseDatagram(msg[:nlmsgHdrLen+2], nil, func(RuleEvent) {}); err == nil {
		t.Errorf("truncated message: no error")
	}
}

// The frontend filter of the iptables layout: chain KUBE-SERVICES of table
// nat, frontends only.
func TestIPTablesFrontendsRule(t *testing.T) {
	a := netip.MustParseAddr("10.96.0.7")
	fe := RuleEvent{Family: unix.NFPROTO_IPV4, Table: "nat", Chain: "KUBE-SERVICES", Daddr: a, Dport: 80, Jump: "KUBE-SVC-A"}
	if got := IPTablesFrontends.rule(fe); len(got) != 1 || got[0] != a {
		t.Errorf("frontend rule: %v, want [%s]", got, a)
	}
	other := fe
	other.Chain = "KUBE-SVC-A"
	filter := fe
	filter.Table = "filter"
	noJump := fe
	noJump.Jump = ""
	for _, ev := range []RuleEvent{other, filter, noJump} {
		if got := IPTablesFrontends.rule(ev); got != nil {
			t.Errorf("rule %+v: %v, want none", ev, got)
		}
	}
	if got := svcnetFrontends.rule(fe); got != nil {
		t.Errorf("the nftables layout took a rule: %v", got)
	}
	if got := IPTablesFrontends.elem(ElemEvent{Table: "nat", Set: "service-ips", Keys: [][]byte{ip4("10.96.0.8")}}); got != nil {
		t.Errorf("the iptables layout took an element: %v", got)
	}
}

func TestCountFrontendRules(t *testing.T) {
	// `nft list chain ip nat KUBE-SERVICES` of an iptables-nft chain.
	out := `# Warning: table ip nat is managed by iptables-nft, do not touch!
table ip nat {
	chain KUBE-SERVICES {
		meta l4proto tcp ip daddr 10.96.0.10  tcp dport 80 counter packets 0 bytes 0 jump KUBE-SVC-ABC
		meta l4proto tcp ip daddr 10.96.0.11  tcp dport 443 counter packets 0 bytes 0 jump KUBE-SVC-DEF
		meta l4proto tcp ip daddr 10.96.0.0/16 counter packets 0 bytes 0 jump KUBE-SVC-NET
		meta l4proto tcp ip daddr 10.96.0.12  tcp dport 80 counter packets 0 bytes 0 accept
		fib daddr type local counter packets 0 bytes 0 jump KUBE-NODEPORTS
		ip daddr 172.26.236.177 counter packets 0 bytes 0 jump KUBE-NODEPORTS
	}
}
`
	if n := countFrontendRules(out); n != 2 {
		t.Errorf("countFrontendRules = %d, want 2", n)
	}
}
