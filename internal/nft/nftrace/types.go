package nftrace

import (
	"fmt"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"golang.org/x/sys/unix"
)

// NFProto is a netfilter protocol family (NFPROTO_*): the family of a table,
// or of the packet a hook processes.
type NFProto uint8

// String returns the nft family keyword ("ip", "ip6", "inet", ...).
func (p NFProto) String() string {
	switch p {
	case unix.NFPROTO_IPV4:
		return "ip"
	case unix.NFPROTO_IPV6:
		return "ip6"
	case unix.NFPROTO_INET:
		return "inet"
	case unix.NFPROTO_ARP:
		return "arp"
	case unix.NFPROTO_BRIDGE:
		return "bridge"
	case unix.NFPROTO_NETDEV:
		return "netdev"
	}
	return fmt.Sprintf("family(%d)", uint8(p))
}

// Family returns svcnet's model family of an ip or ip6 table family.
func (p NFProto) Family() (ipfamily.Family, bool) {
	return ipfamily.FromProto(uint8(p))
}

// Type is the kind of a trace event (NFTA_TRACE_TYPE); see the package doc
// for when the kernel emits each.
type Type uint32

const (
	TypeRule   Type = unix.NFT_TRACETYPE_RULE
	TypeReturn Type = unix.NFT_TRACETYPE_RETURN
	TypePolicy Type = unix.NFT_TRACETYPE_POLICY
)

func (t Type) String() string {
	switch t {
	case TypeRule:
		return "rule"
	case TypeReturn:
		return "return"
	case TypePolicy:
		return "policy"
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Code is a verdict code: a netfilter verdict (NF_DROP 0, NF_ACCEPT 1, ...)
// or an nf_tables one (negative: continue, break, jump, goto, return).
type Code int32

// Verdict codes (uapi netfilter.h NF_*, nf_tables.h NFT_*).
const (
	Drop     Code = 0
	Accept   Code = 1
	Stolen   Code = 2
	Queue    Code = 3
	Repeat   Code = 4
	Stop     Code = 5
	Continue Code = unix.NFT_CONTINUE
	Break    Code = unix.NFT_BREAK
	Jump     Code = unix.NFT_JUMP
	Goto     Code = unix.NFT_GOTO
	Return   Code = unix.NFT_RETURN
)

// nfVerdictMask keeps the verdict of a netfilter verdict whose upper bits
// carry an argument (a queue number, a drop errno).
const nfVerdictMask = 0xff

func (c Code) String() string {
	switch c {
	case Drop:
		return "drop"
	case Accept:
		return "accept"
	case Stolen:
		return "stolen"
	case Queue:
		return "queue"
	case Repeat:
		return "repeat"
	case Stop:
		return "stop"
	case Continue:
		return "continue"
	case Break:
		return "break"
	case Jump:
		return "jump"
	case Goto:
		return "goto"
	case Return:
		return "return"
	}
	return fmt.Sprintf("verdict(%d)", int32(c))
}

// Verdict is the verdict a rule or chain end produced.
type Verdict struct {
	// Code is the verdict; for netfilter verdicts (≥ 0) without the
	// argument bits (queue number, drop errno).
	Code Code
	// Chain is the target of jump and goto.
	Chain string
}

func (v Verdict) String() string {
	if v.Chain != "" {
		return v.Code.String() + " " + v.Chain
	}
	return v.Code.String()
}
