package announce

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var (
	lbIPv6  = netip.MustParseAddr("fd00:26:236::b4")
	askerV6 = netip.MustParseAddr("fd00:26:236::a")
)

func TestSolicitedNode(t *testing.T) {
	cases := []struct{ ip, group, mac string }{
		{"fd00:26:236::b4", "ff02::1:ff00:b4", "33:33:ff:00:00:b4"},
		{"2001:db8::1:2345:6789", "ff02::1:ff45:6789", "33:33:ff:45:67:89"},
		{"fe80::aabb:ccff:fedd:eeff", "ff02::1:ffdd:eeff", "33:33:ff:dd:ee:ff"},
	}
	for _, tc := range cases {
		g := solicitedNode(netip.MustParseAddr(tc.ip))
		if g != netip.MustParseAddr(tc.group) {
			t.Errorf("solicitedNode(%s) = %s, want %s", tc.ip, g, tc.group)
		}
		if m := multicastMAC(g).String(); m != tc.mac {
			t.Errorf("multicastMAC(%s) = %s, want %s", g, m, tc.mac)
		}
	}
	if m := multicastMAC(allNodes).String(); m != "33:33:00:00:00:01" {
		t.Errorf("multicastMAC(ff02::1) = %s", m)
	}
}

// nsSpec describes a neighbour solicitation to build with gopacket.
type nsSpec struct {
	ethDst   mac
	src, dst netip.Addr
	target   netip.Addr
	slla     *mac
	hopLimit uint8
	typ      uint8 // ICMPv6 type; NS when zero
}

func nsFrame(t *testing.T, s nsSpec) []byte {
	t.Helper()
	if s.hopLimit == 0 {
		s.hopLimit = 255
	}
	if s.typ == 0 {
		s.typ = icmpNS
	}
	ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: s.hopLimit, SrcIP: s.src.AsSlice(), DstIP: s.dst.AsSlice()}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(s.typ, 0)}
	if err := icmp.SetNetworkLayerForChecksum(ip6); err != nil {
		t.Fatal(err)
	}
	ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: s.target.AsSlice()}
	if s.slla != nil {
		ns.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: s.slla[:]}}
	}
	return serialize(t, &layers.Ethernet{SrcMAC: net.HardwareAddr(askerMAC[:]), DstMAC: net.HardwareAddr(s.ethDst[:]), EthernetType: layers.EthernetTypeIPv6},
		ip6, icmp, ns)
}

// decodedNA is a neighbour advertisement as gopacket reads it.
type decodedNA struct {
	ethDst, ethSrc    mac
	src, dst          netip.Addr
	hopLimit          uint8
	target            netip.Addr
	solicited, router bool
	override          bool
	tlla              mac
}

func decodeNAWithGopacket(t *testing.T, frame []byte) decodedNA {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("gopacket: %v", el.Error())
	}
	eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip6, _ := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	icmp, _ := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	na, _ := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	if eth == nil || ip6 == nil || icmp == nil || na == nil {
		t.Fatalf("gopacket found no ethernet/ipv6/icmpv6/na layers in % x", frame)
	}
	if err := icmp.SetNetworkLayerForChecksum(ip6); err != nil {
		t.Fatal(err)
	}
	if err, res := icmp.VerifyChecksum(); err != nil || !res.Valid {
		t.Errorf("checksum %#04x invalid (correct %#04x, err %v)", res.Actual, res.Correct, err)
	}
	if icmp.TypeCode.Code() != 0 {
		t.Errorf("icmp code %d", icmp.TypeCode.Code())
	}
	d := decodedNA{hopLimit: ip6.HopLimit, solicited: na.Solicited(), router: na.Router(), override: na.Override()}
	d.ethDst, _ = macFrom(eth.DstMAC)
	d.ethSrc, _ = macFrom(eth.SrcMAC)
	d.src, _ = netip.AddrFromSlice(ip6.SrcIP)
	d.dst, _ = netip.AddrFromSlice(ip6.DstIP)
	d.target, _ = netip.AddrFromSlice(na.TargetAddress)
	for _, o := range na.Options {
		if o.Type == layers.ICMPv6OptTargetAddress {
			d.tlla, _ = macFrom(o.Data)
		}
	}
	return d
}

func TestAnswerNS(t *testing.T) {
	owned := func(ip netip.Addr) bool { return ip == lbIPv6 }
	group := solicitedNode(lbIPv6)
	notOwnedIP := netip.MustParseAddr("fd00:26:236::b5")
	slla := askerMAC
	otherSLLA := otherMAC
	var zero netip.Addr = netip.IPv6Unspecified()
	cases := []struct {
		name string
		spec nsSpec
		want verdict
		// expected answer, when answered
		naEthDst  mac
		naDst     netip.Addr
		solicited bool
	}{
		{name: "multicast solicitation", spec: nsSpec{ethDst: multicastMAC(group), src: askerV6, dst: group, target: lbIPv6, slla: &slla},
			want: answered, naEthDst: askerMAC, naDst: askerV6, solicited: true},
		{name: "answered to the source link-layer option", spec: nsSpec{ethDst: multicastMAC(group), src: askerV6, dst: group, target: lbIPv6, slla: &otherSLLA},
			want: answered, naEthDst: otherMAC, naDst: askerV6, solicited: true},
		{name: "unicast NUD probe without option", spec: nsSpec{ethDst: selfMAC, src: askerV6, dst: lbIPv6, target: lbIPv6},
			want: answered, naEthDst: askerMAC, naDst: askerV6, solicited: true},
		{name: "DAD probe", spec: nsSpec{ethDst: multicastMAC(group), src: zero, dst: group, target: lbIPv6},
			want: answered, naEthDst: multicastMAC(allNodes), naDst: allNodes, solicited: false},
		{name: "not owned", spec: nsSpec{ethDst: multicastMAC(solicitedNode(notOwnedIP)), src: askerV6, dst: solicitedNode(notOwnedIP), target: notOwnedIP, slla: &slla},
			want: notOwned},
		{name: "unicast to another host", spec: nsSpec{ethDst: otherMAC, src: askerV6, dst: lbIPv6, target: lbIPv6}, want: notToUs},
		{name: "wrong group", spec: nsSpec{ethDst: multicastMAC(allNodes), src: askerV6, dst: allNodes, target: lbIPv6, slla: &slla}, want: notToUs},
		{name: "unicast to us for another IP", spec: nsSpec{ethDst: selfMAC, src: askerV6, dst: askerV6, target: lbIPv6}, want: notToUs},
		{name: "hop limit 64", spec: nsSpec{ethDst: multicastMAC(group), src: askerV6, dst: group, target: lbIPv6, slla: &slla, hopLimit: 64}, want: malformed},
		{name: "multicast target", spec: nsSpec{ethDst: multicastMAC(group), src: askerV6, dst: group, target: group, slla: &slla}, want: malformed},
		{name: "DAD probe with option", spec: nsSpec{ethDst: multicastMAC(group), src: zero, dst: group, target: lbIPv6, slla: &slla}, want: malformed},
		{name: "DAD probe to all-nodes", spec: nsSpec{ethDst: multicastMAC(allNodes), src: zero, dst: allNodes, target: lbIPv6}, want: malformed},
		{name: "echo request", spec: nsSpec{ethDst: selfMAC, src: askerV6, dst: lbIPv6, target: lbIPv6, typ: 128}, want: notRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			frame := nsFrame(t, tc.spec)
			_, na, v := answerNS(frame, selfMAC, owned)
			if v != tc.want {
				t.Fatalf("verdict %v, want %v", v, tc.want)
			}
			if v != answered {
				return
			}
			got := decodeNAWithGopacket(t, na.encode())
			want := decodedNA{ethDst: tc.naEthDst, ethSrc: selfMAC, src: lbIPv6, dst: tc.naDst, hopLimit: 255,
				target: lbIPv6, solicited: tc.solicited, override: true, tlla: selfMAC}
			if got != want {
				t.Errorf("advertisement\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestDecodeNSRejectsCorruption(t *testing.T) {
	group := solicitedNode(lbIPv6)
	slla := askerMAC
	good := nsFrame(t, nsSpec{ethDst: multicastMAC(group), src: askerV6, dst: group, target: lbIPv6, slla: &slla})
	if _, err := decodeNS(good); err != nil {
		t.Fatalf("valid solicitation: %v", err)
	}
	icmp := ethHeaderLen + ipv6HeaderLen
	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	// reseal recomputes the checksum, so that only the mutation is wrong.
	reseal := func(f func(b []byte)) []byte {
		return mutate(func(b []byte) {
			f(b)
			b[icmp+2], b[icmp+3] = 0, 0
			binary.BigEndian.PutUint16(b[icmp+2:], icmpv6Checksum(askerV6, group, b[icmp:]))
		})
	}
	if _, err := decodeNS(reseal(func([]byte) {})); err != nil {
		t.Fatalf("resealed valid solicitation: %v", err)
	}
	cases := map[string][]byte{
		"bad checksum":        mutate(func(b []byte) { b[icmp+2] ^= 0xff }),
		"flipped target bit":  mutate(func(b []byte) { b[icmp+23] ^= 1 }),
		"icmp code 1":         reseal(func(b []byte) { b[icmp+1] = 1 }),
		"truncated payload":   good[:len(good)-4],
		"zero-length option":  reseal(func(b []byte) { b[icmp+ndpMsgLen+1] = 0 }),
		"option past the end": reseal(func(b []byte) { b[icmp+ndpMsgLen+1] = 2 }),
		"short ipv6 header":   good[:ethHeaderLen+20],
	}
	for name, frame := range cases {
		if p, err := decodeNS(frame); err == nil {
			t.Errorf("%s: decoded %+v, want an error", name, p)
		}
	}
}

func TestUnsolicitedNA(t *testing.T) {
	got := decodeNAWithGopacket(t, unsolicitedNA(lbIPv6, selfMAC).encode())
	want := decodedNA{ethDst: mac{0x33, 0x33, 0, 0, 0, 1}, ethSrc: selfMAC, src: lbIPv6, dst: allNodes, hopLimit: 255,
		target: lbIPv6, override: true, tlla: selfMAC}
	if got != want {
		t.Errorf("unsolicited advertisement\n got %+v\nwant %+v", got, want)
	}
}
