//go:build linux

package conntrack

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// dumpMessage encodes f as the kernel sends it in a dump: nfgenmsg, both
// tuples, status, zone and ID.
func dumpMessage(fam ipfamily.Family, f Flow) []byte {
	b := (&nl.Nfgenmsg{NfgenFamily: uint8(fam), Version: nl.NFNETLINK_V0}).Serialize()
	b = append(b, tupleAttr(nl.CTA_TUPLE_ORIG, f.Proto, f.OrigSrc, f.OrigDst).Serialize()...)
	b = append(b, tupleAttr(nl.CTA_TUPLE_REPLY, f.Proto, f.ReplySrc, f.ReplyDst).Serialize()...)
	b = append(b, nl.NewRtAttr(nl.CTA_STATUS, nl.BEUint32Attr(0x18e)).Serialize()...)
	if f.Zone != 0 {
		b = append(b, nl.NewRtAttr(nl.CTA_ZONE, nl.BEUint16Attr(f.Zone)).Serialize()...)
	}
	return append(b, nl.NewRtAttr(nl.CTA_ID, nl.BEUint32Attr(f.ID)).Serialize()...)
}

func TestParseFlow(t *testing.T) {
	for _, f := range []Flow{
		{Proto: ProtoUDP, OrigSrc: ap("127.0.0.1:40000"), OrigDst: ap("10.96.0.10:53"), ReplySrc: ap("10.0.0.1:5353"), ReplyDst: ap("127.0.0.1:40000"), ID: 0xdeadbeef},
		{Proto: ProtoSCTP, OrigSrc: ap("[fd00::1]:5000"), OrigDst: ap("[fd00:96::1e]:3868"), ReplySrc: ap("[fd00::2]:3869"), ReplyDst: ap("[fd00::1]:5000"), Zone: 9, ID: 1},
	} {
		got, err := parseFlow(dumpMessage(f.Family(), f))
		if err != nil {
			t.Fatalf("parseFlow(%s): %v", f, err)
		}
		if diff := cmp.Diff(f, got, flowEqual); diff != "" {
			t.Errorf("parseFlow round trip (-want +got):\n%s", diff)
		}
	}
}

func TestParseFlowMalformed(t *testing.T) {
	f := udp("127.0.0.1:40000", "10.96.0.10:53", "10.0.0.1:5353")
	full := dumpMessage(ipfamily.IPv4, f)
	noReply := (&nl.Nfgenmsg{NfgenFamily: uint8(ipfamily.IPv4)}).Serialize()
	noReply = append(noReply, tupleAttr(nl.CTA_TUPLE_ORIG, f.Proto, f.OrigSrc, f.OrigDst).Serialize()...)
	for name, msg := range map[string][]byte{
		"short":     {2, 0},
		"truncated": full[:len(full)-20], // into the reply tuple
		"no reply":  noReply,
	} {
		if _, err := parseFlow(msg); !errors.Is(err, errMalformed) {
			t.Errorf("%s: parseFlow error = %v, want errMalformed", name, err)
		}
	}
}

func TestDeleteAttrs(t *testing.T) {
	f := udp("127.0.0.1:40000", "10.96.0.10:53", "10.0.0.1:5353")
	f.Zone, f.ID = 4, 77
	attrs, err := deleteAttrs(ipfamily.IPv4, f)
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, a := range attrs {
		b = append(b, a.Serialize()...)
	}
	parsed, err := nl.ParseRouteAttrAsMap(b)
	if err != nil {
		t.Fatal(err)
	}
	orig, ok := parsed[unix.NLA_F_NESTED|nl.CTA_TUPLE_ORIG]
	if !ok || len(parsed) != 3 {
		t.Fatalf("delete attributes %v, want nested orig tuple, zone and id", parsed)
	}
	proto, src, dst, err := parseTuple(orig.Value)
	if err != nil || proto != ProtoUDP || src != f.OrigSrc || dst != f.OrigDst {
		t.Errorf("orig tuple = %d %s %s %v, want %s", proto, src, dst, err, f)
	}
	if z := binary.BigEndian.Uint16(parsed[nl.CTA_ZONE].Value); z != 4 {
		t.Errorf("zone = %d, want 4", z)
	}
	if id := binary.BigEndian.Uint32(parsed[nl.CTA_ID].Value); id != 77 {
		t.Errorf("id = %d, want 77", id)
	}

	for name, bad := range map[string]struct {
		fam  ipfamily.Family
		flow Flow
	}{
		"no ports":        {ipfamily.IPv4, withProto(f, unix.IPPROTO_ICMP)},
		"wrong family":    {ipfamily.IPv6, f},
		"missing address": {ipfamily.IPv4, Flow{Proto: ProtoUDP}},
	} {
		if a, err := deleteAttrs(bad.fam, bad.flow); err == nil {
			t.Errorf("%s: deleteAttrs = %v, want error", name, a)
		}
	}
}
