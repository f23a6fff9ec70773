package nftrace

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/nft/netlink"
)

// Conntrack attributes of trace events (uapi nf_tables.h, enum
// nft_trace_attributes, after NFTA_TRACE_PAD = 17), added upstream in 2025;
// golang.org/x/sys/unix does not name them yet.
const (
	nftaTraceCTID        = 18 // NLA_U32, conntrack id
	nftaTraceCTDirection = 19 // NLA_U8, IP_CT_DIR_ORIGINAL (0) or _REPLY (1)
	nftaTraceCTStatus    = 20 // NLA_U32 (big endian), IPS_* bits
	nftaTraceCTState     = 21 // NLA_U32 (big endian), NF_CT_STATE_* bits
)

// parseEvent decodes an NFT_MSG_TRACE message.
func parseEvent(m netlink.TraceMsg) (Event, error) {
	e := Event{Family: NFProto(m.Family)}
	attrs, err := netlink.ParseAttrs(m.Attrs)
	if err != nil {
		return Event{}, fmt.Errorf("trace event: %w", err)
	}
	var nh, th []byte
	var ct CT
	hasCT := false
	for _, a := range attrs {
		switch a.Type {
		case unix.NFTA_TRACE_TABLE:
			e.Table = a.String()
		case unix.NFTA_TRACE_CHAIN:
			e.Chain = a.String()
		case unix.NFTA_TRACE_RULE_HANDLE:
			e.Handle = be64(a.Data)
		case unix.NFTA_TRACE_TYPE:
			e.Type = Type(be32(a.Data))
		case unix.NFTA_TRACE_VERDICT:
			if e.Verdict, err = parseVerdict(a.Data); err != nil {
				return Event{}, err
			}
		case unix.NFTA_TRACE_ID:
			e.ID = be32(a.Data)
		case unix.NFTA_TRACE_NETWORK_HEADER:
			nh = a.Data
		case unix.NFTA_TRACE_TRANSPORT_HEADER:
			th = a.Data
		case unix.NFTA_TRACE_IIF:
			e.Iif = be32(a.Data)
		case unix.NFTA_TRACE_OIF:
			e.Oif = be32(a.Data)
		case unix.NFTA_TRACE_MARK:
			e.Mark = be32(a.Data)
		case unix.NFTA_TRACE_NFPROTO:
			e.NFProto = NFProto(be32(a.Data))
		case unix.NFTA_TRACE_POLICY:
			p := be32(a.Data)
			if p > nfVerdictMask { // some old kernels sent it in host byte order
				p = binary.LittleEndian.Uint32(a.Data)
			}
			e.Policy = Code(p & nfVerdictMask)
		case nftaTraceCTState:
			ct.State, hasCT = be32(a.Data), true
		case nftaTraceCTID:
			ct.ID, ct.HasEntry, hasCT = be32(a.Data), true, true
		case nftaTraceCTDirection:
			if len(a.Data) > 0 {
				ct.Direction, ct.HasEntry, hasCT = a.Data[0], true, true
			}
		case nftaTraceCTStatus:
			ct.Status, ct.HasEntry, hasCT = be32(a.Data), true, true
		}
	}
	if hasCT {
		e.CT = &ct
	}
	if nh != nil {
		p, err := parsePacket(nh, th)
		if err != nil {
			return Event{}, err
		}
		e.Packet = &p
	}
	return e, nil
}

// parseVerdict decodes a nested NFTA_VERDICT_CODE / NFTA_VERDICT_CHAIN.
func parseVerdict(b []byte) (Verdict, error) {
	attrs, err := netlink.ParseAttrs(b)
	if err != nil {
		return Verdict{}, fmt.Errorf("trace event verdict: %w", err)
	}
	var v Verdict
	for _, a := range attrs {
		switch a.Type {
		case unix.NFTA_VERDICT_CODE:
			v.Code = Code(int32(be32(a.Data)))
			if v.Code >= 0 {
				v.Code &= nfVerdictMask
			}
		case unix.NFTA_VERDICT_CHAIN:
			v.Chain = a.String()
		}
	}
	return v, nil
}

// parsePacket decodes the network header (at most 40 bytes) and transport
// header (at most 20 bytes; absent for fragments) the kernel copied.
func parsePacket(nh, th []byte) (Packet, error) {
	var p Packet
	var src, dst netip.Addr
	switch {
	case len(nh) >= 20 && nh[0]>>4 == 4:
		p.Proto = nh[9]
		src, dst = netip.AddrFrom4([4]byte(nh[12:16])), netip.AddrFrom4([4]byte(nh[16:20]))
	case len(nh) >= 40 && nh[0]>>4 == 6:
		// The next header of the fixed header: the transport protocol
		// unless extension headers come first (not reported by the kernel).
		p.Proto = nh[6]
		src, dst = netip.AddrFrom16([16]byte(nh[8:24])), netip.AddrFrom16([16]byte(nh[24:40]))
	default:
		return Packet{}, fmt.Errorf("trace event: network header of %d bytes is neither IPv4 nor IPv6", len(nh))
	}
	var sport, dport uint16
	switch p.Proto {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_UDPLITE, unix.IPPROTO_SCTP, unix.IPPROTO_DCCP:
		if len(th) >= 4 {
			sport, dport = binary.BigEndian.Uint16(th), binary.BigEndian.Uint16(th[2:])
		}
	}
	if p.Proto == unix.IPPROTO_TCP && len(th) >= 14 {
		p.TCPFlags = TCPFlags(th[13])
	}
	p.Src, p.Dst = netip.AddrPortFrom(src, sport), netip.AddrPortFrom(dst, dport)
	return p, nil
}

func be32(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

func be64(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
