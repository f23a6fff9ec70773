package nft

import "net/netip"

// Expr is one match or statement of a rule. The set of expressions is closed:
// the netlink compiler, the decompiler and the simulator handle each of them.
type Expr interface{ isExpr() }

// AddrMatch matches the source or destination address against a prefix (an
// address when the prefix is full-length): `ip saddr != 10.0.0.0/8`.
type AddrMatch struct {
	Field  Field // FieldSaddr or FieldDaddr
	Neq    bool
	Prefix netip.Prefix
}

// ProtoMatch matches the layer-4 protocol: `meta l4proto tcp`.
type ProtoMatch struct{ Proto uint8 }

// PortMatch matches the transport destination or source port: `th dport 80`.
type PortMatch struct {
	Field Field // FieldDport or FieldSport
	Port  uint16
}

// CtState is a conntrack state bit mask.
type CtState uint32

// Conntrack states as the kernel numbers them.
const (
	CtInvalid     CtState = 1
	CtEstablished CtState = 2
	CtRelated     CtState = 4
	CtNew         CtState = 8
)

// CtStateMatch matches when the packet's conntrack state is one of States: `ct state new`.
type CtStateMatch struct{ States CtState }

// FibLocal matches packets whose destination address (or source address, with
// Saddr) is local to the node: `fib daddr type local`, `fib saddr type local`.
type FibLocal struct{ Saddr bool }

// IfNameSize is the kernel's IFNAMSIZ: an interface name has at most
// IfNameSize-1 bytes.
const IfNameSize = 16

// IifnameMatch matches the name of the interface the packet came in on:
// `iifname "cbr0"`, or with Prefix any name that starts with Name:
// `iifname "veth*"`; Neq negates. The match is by name, so it holds for
// interfaces created after the rule. Where a packet has no input interface
// (output and postrouting hooks) its name is empty, so only a != match holds;
// a packet a local process sent to a local address comes back in at
// prerouting on "lo". Name is never empty (nft refuses `iifname ""`).
type IifnameMatch struct {
	Name   string
	Prefix bool
	Neq    bool
}

// MarkMatch matches `meta mark & Mask == Value` (or != with Neq).
type MarkMatch struct {
	Mask, Value uint32
	Neq         bool
}

// Random matches when `numgen random mod Mod` equals Value.
type Random struct{ Mod, Value uint32 }

// Lookup matches when the concatenation of Fields is (or with Neq, is not) an
// element of the named set: `ip daddr . meta l4proto . th dport @cluster-ips`.
type Lookup struct {
	Fields []Field
	Set    string
	Neq    bool
}

// VMap looks the concatenation of Fields up in a named verdict map and applies
// the element's verdict; a miss continues with the next rule.
type VMap struct {
	Fields []Field
	Map    string
}

// VerdictKind is a verdict.
type VerdictKind uint8

const (
	Accept VerdictKind = iota + 1
	Drop
	Return
	Jump
	Goto
)

// Verdict ends or redirects evaluation: accept, drop, return, jump C, goto C.
type Verdict struct {
	Kind  VerdictKind
	Chain string
}

// DNAT rewrites the destination: `dnat to 10.0.0.1:80`. A rule using it must
// match the protocol first (ProtoMatch), as nft requires for the port.
type DNAT struct{ To netip.AddrPort }

// Masquerade rewrites the source to the outgoing interface's address.
type Masquerade struct{ FullyRandom bool }

// Redirect rewrites the destination to a local address and Port: `redirect
// to :8080`. The address is the kernel's choice (nf_nat_redirect): for a
// packet that arrived on an interface, that interface's primary address of
// the family (its first IPv4 address; its first IPv6 address in the
// kernel's list, where global addresses come before link-local ones), the
// packet dropped when it has none; for a locally generated packet (output
// hook) 127.0.0.1 or ::1. Like DNAT it is valid only in nat chains at
// prerouting and output, and a rule using it must match the protocol first
// (ProtoMatch). Port is never 0.
type Redirect struct{ Port uint16 }

// MarkOp is how SetMark combines with the current mark.
type MarkOp uint8

const (
	MarkOr  MarkOp = iota + 1 // meta mark set meta mark | V
	MarkXor                   // meta mark set meta mark ^ V
)

// SetMark sets the packet mark from the current mark and Value.
type SetMark struct {
	Op    MarkOp
	Value uint32
}

// SetNftrace sets the packet's nftrace bit: `meta nftrace set 1`. The kernel
// then reports the packet's way through every nf_tables chain of its network
// namespace as trace events (package nftrace reads them); the packet's
// forwarding is unchanged, so the rule goes on to its next expression.
type SetNftrace struct{}

// Reject answers with a TCP reset (TCPReset; the rule must match tcp first) or
// an ICMP/ICMPv6 port unreachable.
type Reject struct{ TCPReset bool }

// Update adds the concatenation of Fields to a dynamic set, refreshing its
// timeout: `update @affinity { ip saddr }`.
type Update struct {
	Set    string
	Fields []Field
}

// Counter counts packets and bytes.
type Counter struct{}

func (AddrMatch) isExpr()    {}
func (ProtoMatch) isExpr()   {}
func (PortMatch) isExpr()    {}
func (CtStateMatch) isExpr() {}
func (FibLocal) isExpr()     {}
func (IifnameMatch) isExpr() {}
func (MarkMatch) isExpr()    {}
func (Random) isExpr()       {}
func (Lookup) isExpr()       {}
func (VMap) isExpr()         {}
func (Verdict) isExpr()      {}
func (DNAT) isExpr()         {}
func (Masquerade) isExpr()   {}
func (Redirect) isExpr()     {}
func (SetMark) isExpr()      {}
func (SetNftrace) isExpr()   {}
func (Reject) isExpr()       {}
func (Update) isExpr()       {}
func (Counter) isExpr()      {}

// Small constructors for readable rule building.

// JumpTo returns `jump c`.
func JumpTo(c string) Verdict { return Verdict{Kind: Jump, Chain: c} }

// GotoTo returns `goto c`.
func GotoTo(c string) Verdict { return Verdict{Kind: Goto, Chain: c} }

// Daddr matches the destination address (or prefix) p.
func Daddr(p netip.Prefix) AddrMatch { return AddrMatch{Field: FieldDaddr, Prefix: p} }

// Saddr matches the source address (or prefix) p.
func Saddr(p netip.Prefix) AddrMatch { return AddrMatch{Field: FieldSaddr, Prefix: p} }

// Host returns the full-length prefix of a.
func Host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }
