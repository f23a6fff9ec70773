//go:build linux

package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// ctnetlink message encoding. netlink.ConntrackTableList is not used because
// its parser (vishvananda/netlink v1.3.1 parseIpTuple) keeps ports for TCP
// and UDP only, so SCTP frontends could not be matched; and
// netlink.ConntrackDeleteFilters dumps the whole table a second time. Here one
// dump is parsed with ports for every port-carrying protocol, and each stale
// entry is deleted by its original tuple, zone and kernel ID.

// nlaTypeMask strips the NLA_F_NESTED and NLA_F_NET_BYTEORDER flags from an
// attribute type (NLA_TYPE_MASK in linux/netlink.h).
const nlaTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)

// ctnlSubsys is NFNL_SUBSYS_CTNETLINK: the high byte of a ctnetlink message type.
const ctnlSubsys = 1

// ctMsgType returns the netlink message type of ctnetlink operation op
// (nl.IPCTNL_MSG_CT_*).
func ctMsgType(op int) uint16 { return uint16(ctnlSubsys<<8 | op) }

// hasPorts reports whether the kernel's tuple for proto carries source and
// destination ports (TCP, UDP, UDP-Lite, SCTP, DCCP).
func hasPorts(proto uint8) bool {
	switch proto {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_UDPLITE, unix.IPPROTO_SCTP, unix.IPPROTO_DCCP:
		return true
	}
	return false
}

var errMalformed = errors.New("malformed ctnetlink message")

// parseFlow decodes one IPCTNL_MSG_CT_NEW message of a dump (the netlink
// payload: nfgenmsg header, then CTA_* attributes).
func parseFlow(msg []byte) (Flow, error) {
	if len(msg) < nl.SizeofNfgenmsg {
		return Flow{}, fmt.Errorf("%w: %d bytes", errMalformed, len(msg))
	}
	attrs, err := nl.ParseRouteAttr(msg[nl.SizeofNfgenmsg:])
	if err != nil {
		return Flow{}, fmt.Errorf("%w: %w", errMalformed, err)
	}
	var f Flow
	var orig, reply bool
	for _, a := range attrs {
		switch a.Attr.Type & nlaTypeMask {
		case nl.CTA_TUPLE_ORIG:
			if f.Proto, f.OrigSrc, f.OrigDst, err = parseTuple(a.Value); err != nil {
				return Flow{}, fmt.Errorf("original tuple: %w", err)
			}
			orig = true
		case nl.CTA_TUPLE_REPLY:
			if _, f.ReplySrc, f.ReplyDst, err = parseTuple(a.Value); err != nil {
				return Flow{}, fmt.Errorf("reply tuple: %w", err)
			}
			reply = true
		case nl.CTA_ZONE:
			if len(a.Value) < 2 {
				return Flow{}, fmt.Errorf("%w: zone", errMalformed)
			}
			f.Zone = binary.BigEndian.Uint16(a.Value)
		case nl.CTA_ID:
			if len(a.Value) < 4 {
				return Flow{}, fmt.Errorf("%w: id", errMalformed)
			}
			f.ID = binary.BigEndian.Uint32(a.Value)
		}
	}
	if !orig || !reply {
		return Flow{}, fmt.Errorf("%w: missing tuple", errMalformed)
	}
	return f, nil
}

// parseTuple decodes the nested CTA_TUPLE_IP and CTA_TUPLE_PROTO attributes
// of one direction. Ports stay 0 for protocols without ports.
func parseTuple(b []byte) (proto uint8, src, dst netip.AddrPort, err error) {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return 0, src, dst, fmt.Errorf("%w: %w", errMalformed, err)
	}
	var srcIP, dstIP netip.Addr
	var sport, dport uint16
	for _, a := range attrs {
		typ := a.Attr.Type & nlaTypeMask
		if typ != nl.CTA_TUPLE_IP && typ != nl.CTA_TUPLE_PROTO {
			continue // CTA_TUPLE_ZONE: the entry's zone comes from CTA_ZONE
		}
		inner, err := nl.ParseRouteAttr(a.Value)
		if err != nil {
			return 0, src, dst, fmt.Errorf("%w: %w", errMalformed, err)
		}
		switch typ {
		case nl.CTA_TUPLE_IP:
			for _, ia := range inner {
				ip, ok := netip.AddrFromSlice(ia.Value)
				switch t := ia.Attr.Type & nlaTypeMask; {
				case !ok:
					return 0, src, dst, fmt.Errorf("%w: address of %d bytes", errMalformed, len(ia.Value))
				case t == nl.CTA_IP_V4_SRC || t == nl.CTA_IP_V6_SRC:
					srcIP = ip.Unmap()
				case t == nl.CTA_IP_V4_DST || t == nl.CTA_IP_V6_DST:
					dstIP = ip.Unmap()
				}
			}
		case nl.CTA_TUPLE_PROTO:
			for _, pa := range inner {
				switch pa.Attr.Type & nlaTypeMask {
				case nl.CTA_PROTO_NUM:
					if len(pa.Value) >= 1 {
						proto = pa.Value[0]
					}
				case nl.CTA_PROTO_SRC_PORT:
					if len(pa.Value) >= 2 {
						sport = binary.BigEndian.Uint16(pa.Value)
					}
				case nl.CTA_PROTO_DST_PORT:
					if len(pa.Value) >= 2 {
						dport = binary.BigEndian.Uint16(pa.Value)
					}
				}
			}
		}
	}
	if !srcIP.IsValid() || !dstIP.IsValid() {
		return 0, src, dst, fmt.Errorf("%w: tuple without addresses", errMalformed)
	}
	return proto, netip.AddrPortFrom(srcIP, sport), netip.AddrPortFrom(dstIP, dport), nil
}

// deleteAttrs returns the attributes of an IPCTNL_MSG_CT_DELETE for flow f:
// its original tuple, its zone and, when known, its ID (the kernel then
// deletes the entry only if it is still the same one). It never returns an
// empty list: a delete without a tuple would flush the whole table.
func deleteAttrs(fam ipfamily.Family, f Flow) ([]*nl.RtAttr, error) {
	if !hasPorts(f.Proto) {
		return nil, fmt.Errorf("delete flow %s: protocol without ports", f)
	}
	src, dst := normAddrPort(f.OrigSrc), normAddrPort(f.OrigDst)
	if !src.Addr().IsValid() || !dst.Addr().IsValid() || ipfamily.Of(src.Addr()) != fam || ipfamily.Of(dst.Addr()) != fam {
		return nil, fmt.Errorf("delete flow %s: addresses are not %s", f, fam)
	}
	attrs := []*nl.RtAttr{tupleAttr(nl.CTA_TUPLE_ORIG, f.Proto, src, dst)}
	if f.Zone != 0 {
		attrs = append(attrs, nl.NewRtAttr(nl.CTA_ZONE, nl.BEUint16Attr(f.Zone)))
	}
	if f.ID != 0 {
		attrs = append(attrs, nl.NewRtAttr(nl.CTA_ID, nl.BEUint32Attr(f.ID)))
	}
	return attrs, nil
}

// tupleAttr encodes one direction's tuple as the nested attribute typ.
func tupleAttr(typ int, proto uint8, src, dst netip.AddrPort) *nl.RtAttr {
	srcType, dstType := nl.CTA_IP_V4_SRC, nl.CTA_IP_V4_DST
	if src.Addr().Is6() {
		srcType, dstType = nl.CTA_IP_V6_SRC, nl.CTA_IP_V6_DST
	}
	t := nl.NewRtAttr(unix.NLA_F_NESTED|typ, nil)
	ip := t.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_IP, nil)
	ip.AddRtAttr(srcType, src.Addr().AsSlice())
	ip.AddRtAttr(dstType, dst.Addr().AsSlice())
	p := t.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_PROTO, nil)
	p.AddRtAttr(nl.CTA_PROTO_NUM, nl.Uint8Attr(proto))
	p.AddRtAttr(nl.CTA_PROTO_SRC_PORT, nl.BEUint16Attr(src.Port()))
	p.AddRtAttr(nl.CTA_PROTO_DST_PORT, nl.BEUint16Attr(dst.Port()))
	return t
}
