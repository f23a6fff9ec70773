package syncbench

import (
	"encoding/binary"
	"net/netip"

	"golang.org/x/sys/unix"
)

// RuleEvent is one NFT_MSG_NEWRULE notification, reduced to what a Service
// frontend of the iptables layout is made of. iptables-nft translates
// `-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp --dport 80 -j KUBE-SVC-…` into
// nf_tables expressions: payload (network header, the destination address)
// into a register and cmp eq of that register with the address; payload
// (transport header, offset 2, 2 bytes) and cmp eq for the port; an
// immediate jump verdict to the Service's chain. Matches iptables-nft keeps
// as xt expressions (comment, statistic) are not looked into.
type RuleEvent struct {
	Family       uint8 // unix.NFPROTO_IPV4 or unix.NFPROTO_IPV6 (the table's family)
	Table, Chain string
	// Daddr is the destination address the rule compares equal (an exact
	// match, no mask), the zero Addr when it has none.
	Daddr netip.Addr
	// Dport is the transport destination port it compares equal, 0 when none.
	Dport uint16
	// Jump is the chain of the rule's jump or goto verdict, "" when none.
	Jump string
}

// Frontend reports whether the rule sends one destination address and port to
// a chain: in kube-proxy's layout, a Service port's ClusterIP (or external IP)
// rule in KUBE-SERVICES. The port leaves out the chain's last rule, which
// sends a node address (svcnet) or every local one (kube-proxy) to
// KUBE-NODEPORTS.
func (e RuleEvent) Frontend() bool { return e.Daddr.IsValid() && e.Dport != 0 && e.Jump != "" }

// Register contents a rule's cmp can compare, as far as RuleEvent cares.
const (
	regOther = iota
	regDaddr
	regDport
)

// parseNewRule parses the payload of a NEWRULE message: nfgenmsg, then
// NFTA_RULE_* attributes.
func parseNewRule(b []byte) (RuleEvent, error) {
	var ev RuleEvent
	if len(b) < nfgenHdrLen {
		return ev, errShort
	}
	ev.Family = b[0]
	err := walkAttrs(b[nfgenHdrLen:], func(typ uint16, v []byte) error {
		switch typ {
		case unix.NFTA_RULE_TABLE:
			ev.Table = cString(v)
		case unix.NFTA_RULE_CHAIN:
			ev.Chain = cString(v)
		case unix.NFTA_RULE_EXPRESSIONS:
			return parseExprs(v, &ev)
		}
		return nil
	})
	return ev, err
}

// parseExprs walks a rule's expressions in order, following which register
// holds the destination address or port, and fills ev's match and verdict.
func parseExprs(b []byte, ev *RuleEvent) error {
	regs := map[uint32]int{}
	return walkAttrs(b, func(typ uint16, elem []byte) error {
		if typ != unix.NFTA_LIST_ELEM {
			return nil
		}
		var name string
		var data []byte
		err := walkAttrs(elem, func(typ uint16, v []byte) error {
			switch typ {
			case unix.NFTA_EXPR_NAME:
				name = cString(v)
			case unix.NFTA_EXPR_DATA:
				data = v
			}
			return nil
		})
		if err != nil {
			return err
		}
		switch name {
		case "payload":
			return payloadExpr(data, ev.Family, regs)
		case "meta":
			return clobberReg(data, unix.NFTA_META_DREG, regs)
		case "bitwise":
			// A masked address (-d 10.0.0.0/8) is not one address.
			return clobberReg(data, unix.NFTA_BITWISE_DREG, regs)
		case "cmp":
			return cmpExpr(data, ev, regs)
		case "immediate":
			return immediateExpr(data, ev)
		}
		return nil
	})
}

// payloadExpr records what a payload load puts in its register.
func payloadExpr(data []byte, family uint8, regs map[uint32]int) error {
	var dreg, base, off, n uint32
	err := walkAttrs(data, func(typ uint16, v []byte) error {
		if len(v) < 4 {
			return nil
		}
		x := binary.BigEndian.Uint32(v)
		switch typ {
		case unix.NFTA_PAYLOAD_DREG:
			dreg = x
		case unix.NFTA_PAYLOAD_BASE:
			base = x
		case unix.NFTA_PAYLOAD_OFFSET:
			off = x
		case unix.NFTA_PAYLOAD_LEN:
			n = x
		}
		return nil
	})
	if err != nil {
		return err
	}
	kind := regOther
	switch {
	case base == unix.NFT_PAYLOAD_NETWORK_HEADER && family == unix.NFPROTO_IPV4 && off == 16 && n == 4,
		base == unix.NFT_PAYLOAD_NETWORK_HEADER && family == unix.NFPROTO_IPV6 && off == 24 && n == 16:
		kind = regDaddr
	case base == unix.NFT_PAYLOAD_TRANSPORT_HEADER && off == 2 && n == 2:
		kind = regDport
	}
	regs[dreg] = kind
	return nil
}

// clobberReg forgets what register attribute typ of data held before.
func clobberReg(data []byte, typ uint16, regs map[uint32]int) error {
	return walkAttrs(data, func(t uint16, v []byte) error {
		if t == typ && len(v) >= 4 {
			regs[binary.BigEndian.Uint32(v)] = regOther
		}
		return nil
	})
}

// cmpExpr takes an equality with the destination address or port.
func cmpExpr(data []byte, ev *RuleEvent, regs map[uint32]int) error {
	var sreg, op uint32
	var value []byte
	err := walkAttrs(data, func(typ uint16, v []byte) error {
		switch typ {
		case unix.NFTA_CMP_SREG, unix.NFTA_CMP_OP:
			if len(v) < 4 {
				return nil
			}
			if typ == unix.NFTA_CMP_SREG {
				sreg = binary.BigEndian.Uint32(v)
			} else {
				op = binary.BigEndian.Uint32(v)
			}
		case unix.NFTA_CMP_DATA:
			return walkAttrs(v, func(typ uint16, d []byte) error {
				if typ == unix.NFTA_DATA_VALUE {
					value = d
				}
				return nil
			})
		}
		return nil
	})
	if err != nil || op != unix.NFT_CMP_EQ {
		return err
	}
	switch regs[sreg] {
	case regDaddr:
		if a, ok := netip.AddrFromSlice(value); ok && (len(value) == 4 || len(value) == 16) {
			ev.Daddr = a
		}
	case regDport:
		if len(value) == 2 {
			ev.Dport = binary.BigEndian.Uint16(value)
		}
	}
	return nil
}

// immediateExpr takes a jump or goto verdict's chain.
func immediateExpr(data []byte, ev *RuleEvent) error {
	return walkAttrs(data, func(typ uint16, v []byte) error {
		if typ != unix.NFTA_IMMEDIATE_DATA {
			return nil
		}
		return walkAttrs(v, func(typ uint16, verdict []byte) error {
			if typ != unix.NFTA_DATA_VERDICT {
				return nil
			}
			var code int32
			var chain string
			err := walkAttrs(verdict, func(typ uint16, x []byte) error {
				switch {
				case typ == unix.NFTA_VERDICT_CODE && len(x) >= 4:
					code = int32(binary.BigEndian.Uint32(x))
				case typ == unix.NFTA_VERDICT_CHAIN:
					chain = cString(x)
				}
				return nil
			})
			if err == nil && (code == unix.NFT_JUMP || code == unix.NFT_GOTO) {
				ev.Jump = chain
			}
			return err
		})
	})
}
