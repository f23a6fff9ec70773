package tclb

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ebpf/bpfaddr"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// lastMark is the mark of the packet of the last runProg.
var lastMark uint32

// tc verdicts.
const (
	actOK       = 0
	actShot     = 2
	actUnspec   = 0xffffffff // TC_ACT_UNSPEC, -1
	actRedirect = 7
)

var (
	macClient = net.HardwareAddr{2, 0, 0, 0, 0, 0x10}
	macNode   = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macRemote = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

// packet is an Ethernet frame of TCP (flags) or UDP from src to dst, with
// correct checksums.
func packet(t *testing.T, proto model.Protocol, src, dst netip.AddrPort, syn, ack bool) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: macClient, DstMAC: macNode}
	var ip gopacket.NetworkLayer
	var l3 gopacket.SerializableLayer
	ipProto := layers.IPProtocolTCP
	if proto == model.ProtocolUDP {
		ipProto = layers.IPProtocolUDP
	}
	if src.Addr().Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		v4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: ipProto,
			SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		ip, l3 = v4, v4
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		v6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: ipProto,
			SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		ip, l3 = v6, v6
	}
	var l4 gopacket.SerializableLayer
	if proto == model.ProtocolUDP {
		u := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
		u.SetNetworkLayerForChecksum(ip)
		l4 = u
	} else {
		tc := &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()),
			SYN: syn, ACK: ack, Seq: 1000, Window: 65535, DataOffset: 5}
		tc.SetNetworkLayerForChecksum(ip)
		l4 = tc
	}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true},
		eth, l3, l4, gopacket.Payload("hello\n"))
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// decoded is a frame's addresses and ports, its TTL, and whether its
// checksums hold.
type decoded struct {
	src, dst netip.AddrPort
	dstMAC   net.HardwareAddr
	ttl      uint8
	csumOK   bool
	udpZero  bool
}

func decode(t *testing.T, frame []byte) decoded {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	var d decoded
	d.dstMAC = p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet).DstMAC
	var pseudo []byte
	var sa, da netip.Addr
	var proto byte
	if v4, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		sa, _ = netip.AddrFromSlice(v4.SrcIP)
		da, _ = netip.AddrFromSlice(v4.DstIP)
		d.ttl, proto = v4.TTL, byte(v4.Protocol)
		if sum(v4.Contents) != 0xffff {
			t.Errorf("IPv4 header checksum %#04x is wrong", v4.Checksum)
		}
		pseudo = append(append([]byte{}, v4.SrcIP.To4()...), v4.DstIP.To4()...)
		pseudo = append(pseudo, 0, proto)
		pseudo = binary.BigEndian.AppendUint16(pseudo, uint16(len(v4.Payload)))
		d.csumOK = sum(append(pseudo, v4.Payload...)) == 0xffff
	} else if v6, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
		sa, _ = netip.AddrFromSlice(v6.SrcIP)
		da, _ = netip.AddrFromSlice(v6.DstIP)
		d.ttl, proto = v6.HopLimit, byte(v6.NextHeader)
		pseudo = append(append([]byte{}, v6.SrcIP...), v6.DstIP...)
		pseudo = binary.BigEndian.AppendUint32(pseudo, uint32(len(v6.Payload)))
		pseudo = append(pseudo, 0, 0, 0, proto)
		d.csumOK = sum(append(pseudo, v6.Payload...)) == 0xffff
	} else {
		t.Fatalf("frame %x: no IP", frame)
	}
	if tc, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); ok {
		d.src, d.dst = netip.AddrPortFrom(sa, uint16(tc.SrcPort)), netip.AddrPortFrom(da, uint16(tc.DstPort))
	} else if u, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP); ok {
		d.src, d.dst = netip.AddrPortFrom(sa, uint16(u.SrcPort)), netip.AddrPortFrom(da, uint16(u.DstPort))
		if u.Checksum == 0 {
			d.udpZero, d.csumOK = true, true
		}
	}
	return d
}

// sum is the ones' complement sum of b's 16-bit words.
func sum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// runProg runs prog on frame as arriving on (or leaving by) ifindex and
// returns its verdict and the frame it left; lastMark is the packet's mark
// after it.
func runProg(t *testing.T, prog *ebpf.Program, frame []byte, ifindex uint32) (uint32, []byte) {
	t.Helper()
	ctx := make([]byte, 192) // struct __sk_buff
	binary.NativeEndian.PutUint32(ctx[36:], ifindex)
	binary.NativeEndian.PutUint32(ctx[40:], ifindex)
	out := make([]byte, len(frame)+256)
	ctxOut := make([]byte, len(ctx))
	ret, err := prog.Run(&ebpf.RunOptions{Data: frame, DataOut: out, Context: ctx, ContextOut: ctxOut})
	if err != nil {
		t.Fatalf("test run of %v: %v", prog, err)
	}
	lastMark = binary.NativeEndian.Uint32(ctxOut[8:])
	return ret, out[:len(frame)]
}

// TestProgramsDNAT runs the programs on single packets (BPF_PROG_TEST_RUN)
// in a namespace with a route and a neighbour to the remote backend:
// rewrites and checksums of the connection to a local backend (ingress:
// DNAT, client kept; egress: the answer's source back to the frontend), to
// a remote one (ingress: DNAT and SNAT, TTL lowered, forwarded to the
// neighbour; its answer rewritten back and forwarded), both families, TCP
// and UDP; and what is left alone.
func TestProgramsDNAT(t *testing.T) {
	ns := netnstest.New(t, "tclb-run")
	run(t, ns, "ip", "link", "add", "d0", "address", macNode.String(), "type", "veth", "peer", "name", "d1")
	run(t, ns, "ip", "link", "set", "d1", "up")
	run(t, ns, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	run(t, ns, "ip", "link", "set", "d0", "up")
	run(t, ns, "ip", "addr", "add", "10.2.0.1/24", "dev", "d0")
	run(t, ns, "ip", "-6", "addr", "add", "fd32::1/64", "dev", "d0", "nodad")
	run(t, ns, "ip", "neigh", "add", remoteIP4, "lladdr", macRemote.String(), "dev", "d0", "nud", "permanent")
	run(t, ns, "ip", "neigh", "add", remoteIP6, "lladdr", macRemote.String(), "dev", "d0", "nud", "permanent")
	run(t, ns, "ip", "neigh", "add", clientIP4, "lladdr", macClient.String(), "dev", "d0", "nud", "permanent")
	run(t, ns, "ip", "neigh", "add", clientIP6, "lladdr", macClient.String(), "dev", "d0", "nud", "permanent")
	run(t, ns, "ip", "route", "add", "172.30.0.0/24", "dev", "d0")
	run(t, ns, "ip", "-6", "route", "add", "fd30::/64", "dev", "d0")
	var ifindex uint32
	err := ns.Do(func() error {
		ifc, err := net.InterfaceByName("d0")
		if err == nil {
			ifindex = uint32(ifc.Index)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Attached to d0, so that a remote backend routed through it is
	// reached by SNAT and redirect.
	var lb *LB
	err = ns.Do(func() error {
		var err error
		lb, err = Open(Config{SNAT: []netip.Addr{netip.MustParseAddr(nodeIP4), netip.MustParseAddr(nodeIP6)}, MasqueradeMark: 0x4000}, TCX, int(ifindex))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	in, eg := lb.objs.TclbIngress, lb.objs.TclbEgress
	// runIn runs in the namespace, whose routes and neighbours the FIB
	// lookups see.
	runIn := func(prog *ebpf.Program, frame []byte) (ret uint32, out []byte) {
		if err := ns.Do(func() error { ret, out = runProg(t, prog, frame, ifindex); return nil }); err != nil {
			t.Fatal(err)
		}
		return ret, out
	}

	for _, f := range families {
		for _, proto := range []model.Protocol{model.ProtocolTCP, model.ProtocolUDP} {
			t.Run(f.name+"/"+string(proto), func(t *testing.T) {
				front := ap(f.node, nodePort)
				client := ap(f.client, 40001)
				local, remote := ap(f.pod, beNode), ap(f.remote, beNode)
				tcp := proto == model.ProtocolTCP

				// A local backend.
				if err := lb.SetService(front, proto, []Backend{{local, true}}, Policy{}); err != nil {
					t.Fatal(err)
				}
				ret, out := runIn(in, packet(t, proto, client, front, true, false))
				d := decode(t, out)
				if ret != actOK || d.src != client || d.dst != local || !d.csumOK || d.ttl != 64 || lastMark != 0x4000 {
					t.Errorf("first packet to a local backend: verdict %d, %+v, mark %#x; want 0, %v -> %v, checksums right, TTL 64, mark 0x4000 (the rules masquerade it)",
						ret, d, lastMark, client, local)
				}
				ret, out = runIn(eg, packet(t, proto, local, client, tcp, tcp))
				if d := decode(t, out); ret != actUnspec || d.src != front || d.dst != client || !d.csumOK {
					t.Errorf("its answer leaving: verdict %d, %+v; want -1, %v -> %v, checksums right", ret, d, front, client)
				}
				if tcp {
					// Not a SYN, no connection: left alone.
					ret, out = runIn(in, packet(t, proto, ap(f.client, 40009), front, false, true))
					if d := decode(t, out); ret != actUnspec || d.dst != front {
						t.Errorf("an ACK of no connection: verdict %d, %+v; want -1, untouched", ret, d)
					}
				}

				// A remote backend, from another client port.
				if err := lb.SetService(front, proto, []Backend{{remote, false}}, Policy{}); err != nil {
					t.Fatal(err)
				}
				client2 := ap(f.client, 40002)
				ret, out = runIn(in, packet(t, proto, client2, front, true, false))
				d = decode(t, out)
				if ret != actRedirect || d.src.Addr() != front.Addr() || !IsSNATPort(d.src.Port()) || d.dst != remote ||
					!d.csumOK || d.ttl != 63 || d.dstMAC.String() != macRemote.String() {
					t.Errorf("first packet to a remote backend: verdict %d, %+v; want %d, from %v and a SNAT port to %v, checksums right, TTL 63, to %v",
						ret, d, actRedirect, front.Addr(), remote, macRemote)
				}
				snat := d.src
				ret, out = runIn(in, packet(t, proto, remote, snat, tcp, tcp))
				if d := decode(t, out); ret != actRedirect || d.src != front || d.dst != client2 || !d.csumOK || d.ttl != 63 ||
					d.dstMAC.String() != macClient.String() {
					t.Errorf("its answer: verdict %d, %+v; want %d, %v -> %v, checksums right, TTL 63, to %v", ret, d, actRedirect, front, client2, macClient)
				}
				// The first TCP connection keeps its local backend, gone
				// from the set; the first UDP flow was forgotten with it,
				// and its next datagram goes to the remote backend.
				ret, out = runIn(in, packet(t, proto, client, front, false, true))
				if d := decode(t, out); tcp && (ret != actOK || d.dst != local) {
					t.Errorf("the first connection's next packet: verdict %d, %+v; want 0, to %v", ret, d, local)
				} else if !tcp && (ret != actRedirect || d.dst != remote) {
					t.Errorf("the first flow's next datagram: verdict %d, %+v; want %d, to %v", ret, d, actRedirect, remote)
				}
				// Not a frontend: left alone.
				other := ap(f.node, nodePort+1)
				ret, out = runIn(in, packet(t, proto, ap(f.client, 40003), other, true, false))
				if d := decode(t, out); ret != actUnspec || d.dst != other {
					t.Errorf("a packet to no frontend: verdict %d, %+v; want -1, untouched", ret, d)
				}
				if err := lb.DeleteService(front, proto); err != nil {
					t.Fatal(err)
				}
			})
		}
	}

	// A UDP datagram over IPv4 without a checksum keeps none.
	front, local := ap(nodeIP4, nodePort), ap(podIP4, beNode)
	if err := lb.SetService(front, model.ProtocolUDP, []Backend{{local, true}}, Policy{}); err != nil {
		t.Fatal(err)
	}
	frame := packet(t, model.ProtocolUDP, ap(clientIP4, 40004), front, false, false)
	frame[14+20+6], frame[14+20+7] = 0, 0
	ret, out := runIn(in, frame)
	if d := decode(t, out); ret != actOK || d.dst != local || !d.udpZero {
		t.Errorf("a UDP datagram without checksum: verdict %d, %+v; want 0, to %v, still without checksum", ret, d, local)
	}

	// Under the Local policy the client's address is kept: no mark.
	if err := lb.SetService(front, model.ProtocolTCP, []Backend{{local, true}}, Policy{Local: true}); err != nil {
		t.Fatal(err)
	}
	ret, out = runIn(in, packet(t, model.ProtocolTCP, ap(clientIP4, 40005), front, true, false))
	if d := decode(t, out); ret != actOK || d.dst != local || lastMark != 0 {
		t.Errorf("first packet under the Local policy: verdict %d, %+v, mark %#x; want 0, to %v, no mark", ret, d, lastMark, local)
	}

	// A connection last seen by another CPU whose clock reads ahead of
	// this one's (a second here, so that the next packet comes before it)
	// is live: its next packet is translated and its entry kept (an
	// unsigned "now - last seen" would make it ages old, expired, and drop
	// its translation mid-connection).
	client := ap(clientIP4, 40006)
	if ret, _ := runIn(in, packet(t, model.ProtocolTCP, client, front, true, false)); ret != actOK {
		t.Fatalf("a SYN: verdict %d; want 0", ret)
	}
	key := tclbConnKey{Saddr: bpfaddr.AddrWords(client.Addr()), Daddr: bpfaddr.AddrWords(front.Addr()),
		Sport: bpfaddr.PortWord(client.Port()), Dport: bpfaddr.PortWord(front.Port()), Proto: unix.IPPROTO_TCP}
	var cv tclbConnValue
	if err := lb.objs.Conns.Lookup(key, &cv); err != nil {
		t.Fatalf("the SYN's connection: %v", err)
	}
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		t.Fatal(err)
	}
	cv.LastNs = uint64(now.Nano() + time.Second.Nanoseconds())
	if err := lb.objs.Conns.Put(key, cv); err != nil {
		t.Fatal(err)
	}
	ret, out = runIn(in, packet(t, model.ProtocolTCP, client, front, false, true))
	if d := decode(t, out); ret != actOK || d.dst != local {
		t.Errorf("the next packet of a connection seen a second ahead of this clock: verdict %d, %+v; want 0, to %v", ret, d, local)
	}
	if err := lb.objs.Conns.Lookup(key, &cv); err != nil {
		t.Errorf("the connection seen ahead of this clock is gone after its next packet: %v", err)
	}
}
