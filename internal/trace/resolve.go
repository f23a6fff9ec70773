package trace

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/lb/speaker"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/nft"
)

// Ask is a trace request as a user writes it.
type Ask struct {
	// From: a pod ("ns/name" or "name" in default), a node, an external host
	// by name ("client") or any IP[:port].
	From string
	// To: a Service ("ns/name[:port]"), an IP:port (ClusterIP, LB IP,
	// externalIP, pod IP, any address outside the cluster), NODE:nodePort,
	// an external host by name ("client:port"), or a pod ("ns/name[:port]").
	To string
	// Proto: "tcp", "udp" or "sctp"; "" for the Service port's protocol, else tcp.
	Proto string
	// Node: the node that receives a packet from outside to an address that
	// is not a node's; for a Service from outside, the node whose NodePort is
	// used when it has no LoadBalancer or external IP.
	Node string
	// IPv6 picks the IPv6 side of dual-stack places and Services.
	IPv6 bool
	// Rand picks the ephemeral source port; nil uses math/rand/v2.
	Rand func(n int) int
}

// Ephemeral source ports, as Linux's default ip_local_port_range.
const (
	ephemeralLow  = 32768
	ephemeralHigh = 60999
)

// Resolve turns an Ask into a Start and the Request it answers, using the
// cluster state. Errors name what did not resolve and what was expected.
func Resolve(snap *model.Snapshot, net *Network, a Ask) (Start, Request, error) {
	req := Request{From: a.From, To: a.To}
	// A destination address decides the family the sender speaks: "client"
	// to an IPv6 address is the client's IPv6 address.
	v6 := a.IPv6
	if host, _ := splitPort(a.To); host != "" {
		if ip, err := netip.ParseAddr(host); err == nil {
			v6 = ip.Unmap().Is6()
		}
	}
	from, sport, err := resolveFrom(net, a.From, v6)
	if err != nil {
		return Start{}, req, err
	}
	dst, proto, err := resolveTo(snap, net, a, from, &req)
	if err != nil {
		return Start{}, req, err
	}
	if a.Proto != "" {
		proto = strings.ToLower(a.Proto)
	}
	if _, ok := nft.ProtoNumber(proto); !ok {
		return Start{}, req, fmt.Errorf("--proto %q: want tcp, udp or sctp", a.Proto)
	}
	if dst.Addr().Is6() != from.Addr.Is6() {
		if alt := placeAddr(net, from, dst.Addr().Is6()); alt.IsValid() {
			from.Addr = alt
		} else {
			return Start{}, req, fmt.Errorf("from %s (%s) to %s: no address of the destination's family", a.From, from.Addr, dst)
		}
	}
	if sport == 0 {
		rnd := a.Rand
		if rnd == nil {
			rnd = rand.IntN
		}
		sport = uint16(ephemeralLow + rnd(ephemeralHigh-ephemeralLow+1))
		req.EphemeralPort = true
	}
	req.Packet = Tuple{Proto: proto, Src: netip.AddrPortFrom(from.Addr, sport), Dst: dst}
	st := Start{From: from, Packet: req.Packet, Entry: a.Node}
	if from.Kind == PlaceExternal && st.Entry == "" && net.NodeByAddr(dst.Addr()) == nil && len(net.Nodes) > 0 {
		if owner := speaker.Owners(speaker.Config{IsDefault: true}, snap, nil)[dst.Addr()]; owner != "" && net.Node(owner) != nil {
			st.Entry = owner
			req.Notes = append(req.Notes, fmt.Sprintf("%s is a LoadBalancer IP that %s answers ARP/NDP for (svcnet lb's owner hash over the eligible nodes, every speaker assumed alive; --node overrides)", dst.Addr(), owner))
		} else {
			st.Entry = net.Nodes[0].Name
			req.Notes = append(req.Notes, fmt.Sprintf("%s is not a node address: assuming it reaches %s (give --node to pick the node that answers for it)", dst.Addr(), st.Entry))
		}
	}
	return st, req, nil
}

// placeAddr returns the place's address of a family, or invalid.
func placeAddr(net *Network, p Place, v6 bool) netip.Addr {
	switch p.Kind {
	case PlaceNode:
		if nd := net.Node(p.Name); nd != nil {
			return nd.Addr(v6)
		}
	case PlacePod:
		if pod := net.Pod(p.Name); pod != nil {
			return net.PodPlace(pod, v6).Addr
		}
	}
	return netip.Addr{}
}

// resolveFrom finds the sender and the source port when given.
func resolveFrom(net *Network, from string, v6 bool) (Place, uint16, error) {
	host, port := splitPort(from)
	var sport uint16
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return Place{}, 0, fmt.Errorf("from %q: port %q is not a port number", from, port)
		}
		sport = uint16(n)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		if p := net.PodByIP(a); p != nil {
			return net.PodPlace(p, a.Is6()), sport, nil
		}
		if nd := net.NodeByAddr(a); nd != nil {
			pl := net.NodePlace(nd, a.Is6())
			return pl, sport, nil
		}
		return net.ExternalPlace(a), sport, nil
	}
	if a, ok := net.externalAddr(host, v6); ok {
		return net.ExternalPlace(a), sport, nil
	}
	if nd := net.Node(host); nd != nil {
		return net.NodePlace(nd, v6 && nd.Addr(true).IsValid()), sport, nil
	}
	if p := net.Pod(podKey(host)); p != nil {
		if p.HostNetwork {
			if nd := net.Node(p.Node); nd != nil {
				return net.NodePlace(nd, v6), sport, nil
			}
		}
		return net.PodPlace(p, v6 && len(p.IPs) > 1), sport, nil
	}
	return Place{}, 0, fmt.Errorf("from %q: not a pod, node, external host (%s) or IP address", from, strings.Join(externalNames(net), ", "))
}

func externalNames(net *Network) []string {
	var out []string
	for k := range net.Externals {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func podKey(s string) string {
	if strings.Contains(s, "/") {
		return s
	}
	return "default/" + s
}

// splitPort splits "host:port", "[v6]:port", "ns/name:port"; a bare IPv6
// address has no port.
func splitPort(s string) (string, string) {
	if strings.HasPrefix(s, "[") {
		if i := strings.Index(s, "]:"); i > 0 {
			return s[1:i], s[i+2:]
		}
		return strings.Trim(s, "[]"), ""
	}
	if strings.Count(s, ":") > 1 { // a bare IPv6 address
		return s, ""
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// resolveTo finds the destination address:port and the default protocol.
func resolveTo(snap *model.Snapshot, net *Network, a Ask, from Place, req *Request) (netip.AddrPort, string, error) {
	host, port := splitPort(a.To)
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		if port == "" {
			return netip.AddrPort{}, "", fmt.Errorf("to %q: give the port (IP:PORT)", a.To)
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return netip.AddrPort{}, "", fmt.Errorf("to %q: port %q is not a port number", a.To, port)
		}
		dst := netip.AddrPortFrom(ip, uint16(n))
		svc, frontend, proto := serviceOfFrontend(snap, net, dst)
		req.Service, req.Frontend = svc, frontend
		return dst, proto, nil
	}
	if ip, ok := net.externalAddr(host, a.IPv6); ok {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return netip.AddrPort{}, "", fmt.Errorf("to %q: want %s:PORT (an external host's port)", a.To, host)
		}
		return netip.AddrPortFrom(ip, uint16(n)), "tcp", nil
	}
	if nd := net.Node(host); nd != nil {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return netip.AddrPort{}, "", fmt.Errorf("to %q: want NODE:nodePort", a.To)
		}
		dst := netip.AddrPortFrom(nd.Addr(a.IPv6 && nd.Addr(true).IsValid()), uint16(n))
		svc, frontend, proto := serviceOfFrontend(snap, net, dst)
		req.Service, req.Frontend = svc, frontend
		return dst, proto, nil
	}
	key := podKey(host)
	if st := snap.Service(serviceKey(key)); st != nil {
		return serviceDestination(st.Service, net, a, port, from, req)
	}
	if p := net.Pod(key); p != nil {
		pl := net.PodPlace(p, a.IPv6 && len(p.IPs) > 1)
		pm := snap.Pod(serviceKey(key))
		proto, pn := "tcp", uint16(0)
		if port != "" {
			n, err := strconv.ParseUint(port, 10, 16)
			if err != nil || n == 0 {
				return netip.AddrPort{}, "", fmt.Errorf("to %q: port %q is not a port number", a.To, port)
			}
			pn = uint16(n)
		} else if pm != nil && len(pm.ContainerPorts) > 0 {
			pn = uint16(pm.ContainerPorts[0].ContainerPort)
			proto = strings.ToLower(string(pm.ContainerPorts[0].Protocol))
		} else {
			return netip.AddrPort{}, "", fmt.Errorf("to pod %s: it declares no containerPort: give one (%s:PORT)", key, a.To)
		}
		return netip.AddrPortFrom(pl.Addr, pn), proto, nil
	}
	return netip.AddrPort{}, "", fmt.Errorf("to %q: not a Service, pod, node:port, external host:port or IP:port in the cluster state", a.To)
}

func serviceKey(k string) model.ServiceKey {
	ns, name, _ := strings.Cut(k, "/")
	return model.ServiceKey{Namespace: ns, Name: name}
}

// serviceDestination picks the address a sender uses for a Service: its
// ClusterIP from inside the cluster; from outside, a LoadBalancer IP, else an
// externalIP, else the NodePort on the entry node.
func serviceDestination(svc *model.Service, net *Network, a Ask, port string, from Place, req *Request) (netip.AddrPort, string, error) {
	req.Service = svc.Namespace + "/" + svc.Name
	if len(svc.Ports) == 0 {
		return netip.AddrPort{}, "", fmt.Errorf("to Service %s: it has no ports", req.Service)
	}
	sp := svc.Ports[0]
	if port != "" {
		found := false
		for _, p := range svc.Ports {
			if p.Name == port || strconv.Itoa(int(p.Port)) == port {
				sp, found = p, true
				break
			}
		}
		if !found {
			return netip.AddrPort{}, "", fmt.Errorf("to Service %s: no port %q (ports: %s)", req.Service, port, portList(svc))
		}
	}
	proto := strings.ToLower(string(sp.Protocol))
	v6 := a.IPv6
	pick := func(addrs []netip.Addr) netip.Addr {
		for _, x := range addrs {
			if x.Is6() == v6 {
				return x
			}
		}
		return netip.Addr{}
	}
	if from.Kind == PlaceExternal {
		var lbs []netip.Addr
		for _, in := range svc.LoadBalancerIngress {
			if in.IP.IsValid() && in.IPMode != model.IPModeProxy {
				lbs = append(lbs, in.IP)
			}
		}
		if ip := pick(lbs); ip.IsValid() {
			req.Frontend = "LoadBalancer IP"
			return netip.AddrPortFrom(ip, uint16(sp.Port)), proto, nil
		}
		if ip := pick(svc.ExternalIPs); ip.IsValid() {
			req.Frontend = "externalIP"
			return netip.AddrPortFrom(ip, uint16(sp.Port)), proto, nil
		}
		if sp.NodePort != 0 && len(net.Nodes) > 0 {
			nd := &net.Nodes[0]
			if a.Node != "" {
				if nd = net.Node(a.Node); nd == nil {
					return netip.AddrPort{}, "", fmt.Errorf("--node %q: no such node", a.Node)
				}
			}
			req.Frontend = "NodePort"
			req.Notes = append(req.Notes, fmt.Sprintf("from outside the cluster, Service %s is reached on its NodePort %d of node %s", req.Service, sp.NodePort, nd.Name))
			return netip.AddrPortFrom(nd.Addr(v6), uint16(sp.NodePort)), proto, nil
		}
		req.Notes = append(req.Notes, fmt.Sprintf("Service %s has no LoadBalancer IP, externalIP or NodePort: tracing its ClusterIP, which only routes from outside when the network sends it to a node", req.Service))
	}
	ip := pick(svc.ClusterIPs)
	if !ip.IsValid() {
		return netip.AddrPort{}, "", fmt.Errorf("to Service %s: no %s ClusterIP (headless or ExternalName Services have none; trace a pod instead)", req.Service, familyWord(v6))
	}
	req.Frontend = "ClusterIP"
	return netip.AddrPortFrom(ip, uint16(sp.Port)), proto, nil
}

func portList(svc *model.Service) string {
	var out []string
	for _, p := range svc.Ports {
		s := strconv.Itoa(int(p.Port))
		if p.Name != "" {
			s = p.Name + "=" + s
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// serviceOfFrontend names the Service (and which frontend) dst belongs to.
func serviceOfFrontend(snap *model.Snapshot, net *Network, dst netip.AddrPort) (string, string, string) {
	isNode := net.NodeByAddr(dst.Addr()) != nil
	for _, st := range snap.Services() {
		svc := st.Service
		for _, sp := range svc.Ports {
			proto := strings.ToLower(string(sp.Protocol))
			name := svc.Namespace + "/" + svc.Name
			if isNode && sp.NodePort != 0 && uint16(sp.NodePort) == dst.Port() {
				return name, "NodePort", proto
			}
			if uint16(sp.Port) != dst.Port() {
				continue
			}
			switch {
			case slices.Contains(svc.ClusterIPs, dst.Addr()):
				return name, "ClusterIP", proto
			case slices.Contains(svc.ExternalIPs, dst.Addr()):
				return name, "externalIP", proto
			}
			for _, in := range svc.LoadBalancerIngress {
				if in.IP == dst.Addr() {
					return name, "LoadBalancer IP", proto
				}
			}
		}
	}
	return "", "", "tcp"
}
