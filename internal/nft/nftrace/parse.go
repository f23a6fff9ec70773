package nftrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
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

// traceMsgType is the netlink type of a trace event.
const traceMsgType = unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_TRACE

// parseEvent decodes the payload of an NFT_MSG_TRACE message (nfgenmsg and
// attributes).
func parseEvent(b []byte) (Event, error) {
	if len(b) < nfgenLen {
		return Event{}, errors.New("trace event: truncated nfgenmsg")
	}
	e := Event{Family: NFProto(b[0])}
	attrs, err := parseAttrs(b[nfgenLen:])
	if err != nil {
		return Event{}, fmt.Errorf("trace event: %w", err)
	}
	var nh, th []byte
	var ct CT
	hasCT := false
	for _, a := range attrs {
		switch a.typ {
		case unix.NFTA_TRACE_TABLE:
			e.Table = gostring(a.data)
		case unix.NFTA_TRACE_CHAIN:
			e.Chain = gostring(a.data)
		case unix.NFTA_TRACE_RULE_HANDLE:
			e.Handle = be64(a.data)
		case unix.NFTA_TRACE_TYPE:
			e.Type = Type(be32(a.data))
		case unix.NFTA_TRACE_VERDICT:
			if e.Verdict, err = parseVerdict(a.data); err != nil {
				return Event{}, err
			}
		case unix.NFTA_TRACE_ID:
			e.ID = be32(a.data)
		case unix.NFTA_TRACE_NETWORK_HEADER:
			nh = a.data
		case unix.NFTA_TRACE_TRANSPORT_HEADER:
			th = a.data
		case unix.NFTA_TRACE_IIF:
			e.Iif = be32(a.data)
		case unix.NFTA_TRACE_OIF:
			e.Oif = be32(a.data)
		case unix.NFTA_TRACE_MARK:
			e.Mark = be32(a.data)
		case unix.NFTA_TRACE_NFPROTO:
			e.NFProto = NFProto(be32(a.data))
		case unix.NFTA_TRACE_POLICY:
			p := be32(a.data)
			if p > nfVerdictMask { // some old kernels sent it in host byte order
				p = binary.LittleEndian.Uint32(a.data)
			}
			e.Policy = Code(p & nfVerdictMask)
		case nftaTraceCTState:
			ct.State, hasCT = be32(a.data), true
		case nftaTraceCTID:
			ct.ID, ct.HasEntry, hasCT = be32(a.data), true, true
		case nftaTraceCTDirection:
			if len(a.data) > 0 {
				ct.Direction, ct.HasEntry, hasCT = a.data[0], true, true
			}
		case nftaTraceCTStatus:
			ct.Status, ct.HasEntry, hasCT = be32(a.data), true, true
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
	attrs, err := parseAttrs(b)
	if err != nil {
		return Verdict{}, fmt.Errorf("trace event verdict: %w", err)
	}
	var v Verdict
	for _, a := range attrs {
		switch a.typ {
		case unix.NFTA_VERDICT_CODE:
			v.Code = Code(int32(be32(a.data)))
			if v.Code >= 0 {
				v.Code &= nfVerdictMask
			}
		case unix.NFTA_VERDICT_CHAIN:
			v.Chain = gostring(a.data)
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
