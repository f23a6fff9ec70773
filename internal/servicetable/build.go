package servicetable

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

// Build returns the service table of the node cfg describes, for every Service
// of snap. It never fails: a Service the node cannot express is left out and
// reported in Table.Errors, and never affects the others.
//
// Build(snap, cfg) equals Assemble(cfg, ports, errs) where ports and errs are
// the concatenation of BuildService over snap.Services(): the entries of every
// Service sorted by ID and family, less the entries that lose a frontend claim
// to another (see Assemble). An incremental proxy keeps an Assembler, rebuilds
// only the Services that changed with BuildService and Sets them there.
func Build(snap *model.Snapshot, cfg NodeConfig) *Table {
	cfg = normalizeNode(cfg)
	var ports []*ServicePort
	var errs []*SkipError
	if snap != nil {
		for _, st := range snap.Services() {
			p, err := BuildService(st, cfg)
			ports = append(ports, p...)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return Assemble(cfg, ports, errs)
}

// BuildService returns the entries of one Service for the node cfg describes:
// one per (Service port, IP family of its clusterIPs), sorted by ID then family.
//
// It returns nothing, and no error, for what kube-proxy does not proxy: a nil
// state or Service, an ExternalName Service, a Service without clusterIPs
// (headless), a Service without ports. It returns nothing and a SkipError (Port
// "") for a Service carrying a value the apiserver would have rejected and the
// node cannot program: a port or node port out of range, an unknown protocol,
// two ports with the same ID, or a special (loopback, unspecified, link-local,
// multicast) clusterIP, externalIP or LB IP. Conflicts with other Services are
// not detected here but by Assemble.
//
// The result depends only on st and cfg, not on the order of slices or
// endpoints in st, and shares no memory with st.
func BuildService(st *model.ServiceState, cfg NodeConfig) ([]*ServicePort, *SkipError) {
	if st == nil || st.Service == nil {
		return nil, nil
	}
	svc := st.Service
	if svc.Type == model.ServiceTypeExternalName || len(svc.ClusterIPs) == 0 || len(svc.Ports) == 0 {
		return nil, nil
	}
	skip := func(format string, args ...any) *SkipError {
		return &SkipError{Service: svc.Key(), Reason: fmt.Sprintf(format, args...)}
	}
	if reason := validateService(svc); reason != "" {
		return nil, skip("%s", reason)
	}
	cfg.NodePortAddresses = nodePortAddrs(cfg.NodePortAddresses)
	sls := usableSlices(st.Slices)

	var out []*ServicePort
	for _, fam := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		clusterIP, ok := clusterIPOf(svc, fam)
		if !ok {
			continue
		}
		addrs := familyAddrs(svc, cfg, fam)
		for i := range svc.Ports {
			out = append(out, buildPort(svc, &svc.Ports[i], fam, clusterIP, addrs, sls, cfg))
		}
	}
	slices.SortStableFunc(out, compareEntries)
	return out, nil
}

// buildPort builds the entry of one Service port in one family.
func buildPort(svc *model.Service, p *model.ServicePort, fam ipfamily.Family, clusterIP netip.Addr, addrs familyAddresses, sls []*model.EndpointSlice, cfg NodeConfig) *ServicePort {
	sp := &ServicePort{
		ID:                  portID(svc, p),
		Name:                PortName{Namespace: svc.Namespace, Name: svc.Name, Port: p.Name, Protocol: p.Protocol},
		Family:              fam,
		Protocol:            p.Protocol,
		Port:                uint16(p.Port),
		ClusterIP:           clusterIP,
		NodePort:            uint16(p.NodePort),
		ExternalIPs:         addrs.externalIPs,
		LoadBalancerIPs:     addrs.lbIPs,
		SourceRanges:        addrs.sourceRanges,
		InternalPolicyLocal: svc.InternalTrafficPolicy == model.TrafficPolicyLocal,
	}
	sp.Frontends = frontends(sp, addrs.nodePortAddrs)
	sp.ExternalPolicyLocal = externalPolicyLocal(svc) && sp.ExternallyAccessible()
	if svc.Type == model.ServiceTypeLoadBalancer && externalPolicyLocal(svc) {
		sp.HealthCheckNodePort = uint16(svc.HealthCheckNodePort)
	}
	sp.Scheduler = svc.Annotations[model.SchedulerAnnotation]
	if svc.AffinityClientIP {
		sp.AffinityTimeout = svc.AffinityTimeout
		if sp.AffinityTimeout <= 0 {
			sp.AffinityTimeout = model.DefaultAffinityTimeout
		}
	}
	all := gatherEndpoints(sls, fam, p.Name, p.Protocol, cfg.NodeName)
	categorize(sp, all, cfg)
	return sp
}

// externalPolicyLocal is kube-proxy's apiservice.ExternalPolicyLocal: the
// Service takes external traffic by its type (NodePort, LoadBalancer, or
// ClusterIP with externalIPs) and asks for externalTrafficPolicy Local.
func externalPolicyLocal(svc *model.Service) bool {
	accessible := svc.Type == model.ServiceTypeNodePort || svc.Type == model.ServiceTypeLoadBalancer ||
		svc.Type == model.ServiceTypeClusterIP && len(svc.ExternalIPs) > 0
	return accessible && svc.ExternalTrafficPolicy == model.TrafficPolicyLocal
}

// portID returns "namespace/name:port/protocol" (see ServicePort.ID).
func portID(svc *model.Service, p *model.ServicePort) string {
	return svc.Namespace + "/" + svc.Name + ":" + portToken(p)
}

// portToken is the port part of an ID: "http/tcp", or "80/tcp" when unnamed.
func portToken(p *model.ServicePort) string {
	name := p.Name
	if name == "" {
		name = strconv.Itoa(int(p.Port))
	}
	return name + "/" + strings.ToLower(string(p.Protocol))
}

// validateService returns why the Service cannot be programmed, or "".
func validateService(svc *model.Service) string {
	ids := map[string]int{}
	for i := range svc.Ports {
		p := &svc.Ports[i]
		switch {
		case p.Port <= 0 || p.Port > 65535:
			return fmt.Sprintf("spec.ports[%d].port %d out of range", i, p.Port)
		case p.NodePort < 0 || p.NodePort > 65535:
			return fmt.Sprintf("spec.ports[%d].nodePort %d out of range", i, p.NodePort)
		case p.Protocol != model.ProtocolTCP && p.Protocol != model.ProtocolUDP && p.Protocol != model.ProtocolSCTP:
			return fmt.Sprintf("spec.ports[%d].protocol %q not supported", i, p.Protocol)
		}
		tok := portToken(p)
		if j, dup := ids[tok]; dup {
			return fmt.Sprintf("spec.ports[%d] duplicates spec.ports[%d] (%s)", i, j, tok)
		}
		ids[tok] = i
	}
	if v, ok := svc.Annotations[model.SchedulerAnnotation]; ok && !slices.Contains(Schedulers, v) {
		return fmt.Sprintf("annotation %s: %q: want %s", model.SchedulerAnnotation, v, strings.Join(Schedulers, ", "))
	}
	if svc.HealthCheckNodePort < 0 || svc.HealthCheckNodePort > 65535 {
		return fmt.Sprintf("spec.healthCheckNodePort %d out of range", svc.HealthCheckNodePort)
	}
	for i, a := range svc.ClusterIPs {
		if special(a) {
			return fmt.Sprintf("spec.clusterIPs[%d] %v is not a unicast address", i, a)
		}
	}
	for i, a := range svc.ExternalIPs {
		if special(a) {
			return fmt.Sprintf("spec.externalIPs[%d] %v is not a unicast address", i, a)
		}
	}
	for i, ing := range svc.LoadBalancerIngress {
		if ing.IP.IsValid() && special(ing.IP) {
			return fmt.Sprintf("status.loadBalancer.ingress[%d].ip %v is not a unicast address", i, ing.IP)
		}
	}
	return ""
}

// compareEntries orders entries by ID, then family.
func compareEntries(a, b *ServicePort) int {
	if c := strings.Compare(a.ID, b.ID); c != 0 {
		return c
	}
	return cmp.Compare(a.Family, b.Family)
}
