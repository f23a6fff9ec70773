package announce

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var (
	selfMAC  = mac{0x02, 0, 0, 0, 0, 0xaa}
	askerMAC = mac{0x02, 0, 0, 0, 0, 0xbb}
	otherMAC = mac{0x02, 0, 0, 0, 0, 0xcc}
	lbIPv4   = netip.MustParseAddr("172.26.236.180")
	askerV4  = netip.MustParseAddr("172.26.236.10")
)

// serialize builds a frame with gopacket, an encoder independent of ours.
func serialize(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// arpFrame builds an ARP frame with gopacket.
func arpFrame(t *testing.T, ethDst mac, op uint16, sha mac, spa netip.Addr, tha mac, tpa netip.Addr) []byte {
	t.Helper()
	s, d := spa.As4(), tpa.As4()
	return serialize(t,
		&layers.Ethernet{SrcMAC: net.HardwareAddr(sha[:]), DstMAC: net.HardwareAddr(ethDst[:]), EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: op, SourceHwAddress: sha[:], SourceProtAddress: s[:], DstHwAddress: tha[:], DstProtAddress: d[:]})
}

// decodeARPWithGopacket parses our frame with gopacket and returns its layers.
func decodeARPWithGopacket(t *testing.T, frame []byte) (*layers.Ethernet, *layers.ARP) {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("gopacket: %v", el.Error())
	}
	eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	arp, _ := p.Layer(layers.LayerTypeARP).(*layers.ARP)
	if eth == nil || arp == nil {
		t.Fatalf("gopacket found no ethernet/arp layers in % x", frame)
	}
	return eth, arp
}

func TestARPRequestGetsReply(t *testing.T) {
	req := arpFrame(t, broadcastMAC, arpOpRequest, askerMAC, askerV4, mac{}, lbIPv4)
	_, reply, v := answerARP(req, selfMAC, func(ip netip.Addr) bool { return ip == lbIPv4 })
	if v != answered {
		t.Fatalf("verdict %v, want answered", v)
	}
	frame := reply.encode()
	if len(frame) != minFrameLen {
		t.Errorf("reply is %d bytes, want %d (padded)", len(frame), minFrameLen)
	}
	eth, arp := decodeARPWithGopacket(t, frame)
	if !bytes.Equal(eth.DstMAC, askerMAC[:]) || !bytes.Equal(eth.SrcMAC, selfMAC[:]) {
		t.Errorf("ethernet %s -> %s, want %s -> %s (unicast to the asker)", eth.SrcMAC, eth.DstMAC, selfMAC, askerMAC)
	}
	want := layers.ARP{Operation: layers.ARPReply, SourceHwAddress: selfMAC[:], SourceProtAddress: lbIPv4.AsSlice(),
		DstHwAddress: askerMAC[:], DstProtAddress: askerV4.AsSlice()}
	if arp.Operation != want.Operation || !bytes.Equal(arp.SourceHwAddress, want.SourceHwAddress) ||
		!bytes.Equal(arp.SourceProtAddress, want.SourceProtAddress) || !bytes.Equal(arp.DstHwAddress, want.DstHwAddress) ||
		!bytes.Equal(arp.DstProtAddress, want.DstProtAddress) {
		t.Errorf("reply op %d %s/%v -> %s/%v, want op 2 %s/%s -> %s/%s", arp.Operation,
			net.HardwareAddr(arp.SourceHwAddress), net.IP(arp.SourceProtAddress), net.HardwareAddr(arp.DstHwAddress), net.IP(arp.DstProtAddress),
			selfMAC, lbIPv4, askerMAC, askerV4)
	}
	// Our decoder reads our encoder's output back.
	back, err := decodeARP(frame)
	if err != nil || back != reply {
		t.Errorf("decode(encode(reply)) = %+v, %v; want %+v", back, err, reply)
	}
}

func TestGratuitousARPFrames(t *testing.T) {
	frames := gratuitousARP(lbIPv4, selfMAC)
	for i, wantOp := range []uint16{layers.ARPRequest, layers.ARPReply} {
		eth, arp := decodeARPWithGopacket(t, frames[i].encode())
		if !bytes.Equal(eth.DstMAC, broadcastMAC[:]) || !bytes.Equal(eth.SrcMAC, selfMAC[:]) {
			t.Errorf("frame %d: ethernet %s -> %s, want broadcast from %s", i, eth.SrcMAC, eth.DstMAC, selfMAC)
		}
		if arp.Operation != wantOp || !bytes.Equal(arp.SourceHwAddress, selfMAC[:]) ||
			!bytes.Equal(arp.SourceProtAddress, lbIPv4.AsSlice()) || !bytes.Equal(arp.DstProtAddress, lbIPv4.AsSlice()) {
			t.Errorf("frame %d: op %d sha %s spa %v tpa %v; want op %d, sha %s, spa = tpa = %s", i, arp.Operation,
				net.HardwareAddr(arp.SourceHwAddress), net.IP(arp.SourceProtAddress), net.IP(arp.DstProtAddress), wantOp, selfMAC, lbIPv4)
		}
	}
	// RFC 5227 announcement: THA zero; Linux gratuitous reply: THA = SHA.
	if frames[0].THA != (mac{}) || frames[1].THA != selfMAC {
		t.Errorf("target hardware addresses %s, %s; want zero, %s", frames[0].THA, frames[1].THA, selfMAC)
	}
}

func TestAnswerARP(t *testing.T) {
	owned := func(ip netip.Addr) bool { return ip == lbIPv4 }
	notOwnedIP := netip.MustParseAddr("172.26.236.181")
	zero := netip.AddrFrom4([4]byte{})
	cases := []struct {
		name    string
		frame   []byte
		want    verdict
		wantTPA netip.Addr // of the reply, when answered
	}{
		{"broadcast request", arpFrame(t, broadcastMAC, arpOpRequest, askerMAC, askerV4, mac{}, lbIPv4), answered, askerV4},
		{"unicast refresh to us", arpFrame(t, selfMAC, arpOpRequest, askerMAC, askerV4, selfMAC, lbIPv4), answered, askerV4},
		{"probe from 0.0.0.0", arpFrame(t, broadcastMAC, arpOpRequest, askerMAC, zero, mac{}, lbIPv4), answered, zero},
		{"not owned", arpFrame(t, broadcastMAC, arpOpRequest, askerMAC, askerV4, mac{}, notOwnedIP), notOwned, netip.Addr{}},
		{"reply", arpFrame(t, broadcastMAC, arpOpReply, askerMAC, askerV4, selfMAC, lbIPv4), notRequest, netip.Addr{}},
		{"unicast to another host", arpFrame(t, otherMAC, arpOpRequest, askerMAC, askerV4, mac{}, lbIPv4), notToUs, netip.Addr{}},
		{"from our own MAC", arpFrame(t, broadcastMAC, arpOpRequest, selfMAC, askerV4, mac{}, lbIPv4), fromSelf, netip.Addr{}},
		{"another host announces it", arpFrame(t, broadcastMAC, arpOpRequest, otherMAC, lbIPv4, mac{}, lbIPv4), announcement, netip.Addr{}},
		{"truncated", arpFrame(t, broadcastMAC, arpOpRequest, askerMAC, askerV4, mac{}, lbIPv4)[:30], malformed, netip.Addr{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, reply, v := answerARP(tc.frame, selfMAC, owned)
			if v != tc.want {
				t.Fatalf("verdict %v, want %v", v, tc.want)
			}
			if v == answered && (reply.TPA != tc.wantTPA || reply.SPA != lbIPv4 || reply.Op != arpOpReply) {
				t.Errorf("reply %+v, want op 2 %s -> %s", reply, lbIPv4, tc.wantTPA)
			}
		})
	}
}

func TestDecodeARPRejects(t *testing.T) {
	good := arpFrame(t, broadcastMAC, arpOpRequest, askerMAC, askerV4, mac{}, lbIPv4)
	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	cases := map[string][]byte{
		"short ethernet":  good[:10],
		"short arp":       good[:ethHeaderLen+20],
		"ipv6 ethertype":  mutate(func(b []byte) { b[12], b[13] = 0x86, 0xdd }),
		"hardware type 6": mutate(func(b []byte) { b[ethHeaderLen+1] = 6 }),
		"protocol ipv6":   mutate(func(b []byte) { b[ethHeaderLen+2], b[ethHeaderLen+3] = 0x86, 0xdd }),
		"hlen 8":          mutate(func(b []byte) { b[ethHeaderLen+4] = 8 }),
	}
	for name, frame := range cases {
		if p, err := decodeARP(frame); err == nil {
			t.Errorf("%s: decoded %+v, want an error", name, p)
		}
	}
}
