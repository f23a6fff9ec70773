package proxy

import (
	"net/netip"

	"github.com/svcnet/svcnet/internal/conntrack"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/servicetable"
)

// conntrackWant lists every UDP and SCTP frontend of ports, the table's
// entries of those protocols, with the endpoints that may serve it: all
// serving endpoints, whatever the policy, as kube-proxy does (a policy
// change must not cut existing flows).
func conntrackWant(ports map[*servicetable.ServicePort]struct{}) conntrack.Want {
	w := conntrack.Want{}
	for sp := range ports {
		var proto uint8
		switch sp.Protocol {
		case model.ProtocolUDP:
			proto = conntrack.ProtoUDP
		case model.ProtocolSCTP:
			proto = conntrack.ProtoSCTP
		default:
			continue
		}
		var eps []netip.AddrPort
		for _, e := range sp.AllEndpoints {
			if e.Ready || e.Serving {
				eps = append(eps, netip.AddrPortFrom(e.Addr, e.Port))
			}
		}
		for _, fe := range sp.Frontends {
			if fe.Kind == servicetable.FrontendNodePort {
				continue
			}
			w.Add(conntrack.Frontend{Proto: proto, Addr: fe.Addr, Port: fe.Port}, eps...)
		}
		if sp.NodePort != 0 {
			w.Add(conntrack.Frontend{Proto: proto, Port: sp.NodePort}, eps...)
		}
	}
	return w
}
