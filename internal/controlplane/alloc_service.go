package controlplane

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// allocator holds every ClusterIP and node port in use during one Reconcile.
type allocator struct {
	ranges   map[corev1.IPFamily]*ipRange
	families []corev1.IPFamily // primary first
	ports    *portRange
}

func newAllocator(cfg Config) *allocator {
	a := &allocator{ranges: map[corev1.IPFamily]*ipRange{}, ports: newPortRange(cfg.NodePortRange)}
	for _, p := range cfg.ServiceCIDRs {
		r := newIPRange(p)
		a.ranges[r.family] = r
		a.families = append(a.families, r.family)
	}
	return a
}

// svcAlloc is one valid, defaulted Service going through allocation.
type svcAlloc struct {
	key   string // namespace/name
	svc   *corev1.Service
	prior *ServiceAlloc // nil when the Service is not in the previous State
	// requested holds the user's spec.clusterIPs, one entry per spec.ipFamilies
	// ("" where none was given); ips the same, filled as allocation proceeds.
	requested, ips []string
	// userNodePorts are the node ports the user asked for, as the spec had
	// them before allocation (health check port included), in spec order;
	// nil when there are none, as for most Services: a slice scanned
	// rather than two maps per Service, which held 3 MB of a one-shot
	// reader's peak at 10,000 Services.
	userNodePorts []userNodePort
	// deferred lists the port indexes left for dynamic allocation.
	deferred []int
	claims   []claim // made in this run (phases 2 and 3): undone if the Service fails
	err      error
}

// claim is one allocation made in this run, kept so that it can be undone.
type claim struct {
	ip    *ipRange
	addr  netip.Addr
	port  int32
	owner string
}

func newSvcAlloc(svc *corev1.Service, prior *ServiceAlloc) *svcAlloc {
	a := &svcAlloc{key: svc.Namespace + "/" + svc.Name, svc: svc, prior: prior}
	if needsClusterIP(svc) && !isHeadless(svc) {
		a.requested = make([]string, len(svc.Spec.IPFamilies))
		copy(a.requested, svc.Spec.ClusterIPs)
		a.ips = append([]string(nil), a.requested...)
	}
	for _, sp := range svc.Spec.Ports {
		if sp.NodePort != 0 {
			a.userNodePorts = append(a.userNodePorts, userNodePort{port: sp.Port, nodePort: sp.NodePort})
		}
	}
	if hc := svc.Spec.HealthCheckNodePort; hc != 0 {
		a.userNodePorts = append(a.userNodePorts, userNodePort{nodePort: hc})
	}
	return a
}

// userNodePort is a node port the user asked for: for the Service port
// numbered port, or (port 0) as the health check node port.
type userNodePort struct{ port, nodePort int32 }

// requestedFor reports whether the user asked for a node port for the
// Service port numbered port.
func (a *svcAlloc) requestedFor(port int32) bool {
	for _, u := range a.userNodePorts {
		if u.port == port && u.port != 0 {
			return true
		}
	}
	return false
}

// userAsked reports whether the user asked for node port np (for any
// Service port, or as the health check port).
func (a *svcAlloc) userAsked(np int32) bool {
	for _, u := range a.userNodePorts {
		if u.nodePort == np {
			return true
		}
	}
	return false
}

// Owner tokens: one per ClusterIP holder, per node port number, per health check.
func (a *svcAlloc) ipOwner() string              { return a.key }
func (a *svcAlloc) nodePortOwner(p int32) string { return a.key + "#port/" + strconv.Itoa(int(p)) }
func (a *svcAlloc) healthOwner() string          { return a.key + "#health" }

// fail undoes this run's claims of a and records err.
func (al *allocator) fail(a *svcAlloc, err error) {
	for _, c := range a.claims {
		if c.ip != nil {
			c.ip.release(c.addr, c.owner)
		} else {
			al.ports.release(c.port, c.owner)
		}
	}
	a.claims, a.err = nil, err
}

// allocateAll allocates for svcs, which must be in priority order (default/kubernetes
// first, then by namespace/name), in three phases so that nothing held before is
// ever moved: (1) every Service re-claims what the previous State gave it and its
// spec still allows, (2) explicit requests, (3) dynamic allocation. A Service whose
// request cannot be met, or whose range is full, gets err set and holds nothing
// new; what it held before stays reserved, as the apiserver keeps the old object
// when an update is rejected.
func (al *allocator) allocateAll(svcs []*svcAlloc) {
	for _, a := range svcs {
		_ = al.claimPrior(a)
	}
	for _, a := range svcs {
		if err := al.claimRequested(a); err != nil {
			al.fail(a, err)
		}
	}
	for _, a := range svcs {
		if a.err != nil {
			continue
		}
		if err := al.allocateDynamic(a); err != nil {
			al.fail(a, err)
			continue
		}
		a.finish()
	}
}

// reserve holds everything in prior for a Service that was left out (invalid),
// so that its allocations survive until it is fixed or deleted.
func (al *allocator) reserve(key string, prior ServiceAlloc) {
	a := &svcAlloc{key: key}
	for _, s := range prior.ClusterIPs {
		if ip, err := netip.ParseAddr(s); err == nil {
			if r := al.ranges[familyOf(s)]; r != nil {
				_, _ = r.claim(ip, a.ipOwner())
			}
		}
	}
	for k, np := range prior.NodePorts {
		_, _ = al.ports.claim(np, a.nodePortOwner(portOfKey(k)))
	}
	if prior.HealthCheckNodePort != 0 {
		_, _ = al.ports.claim(prior.HealthCheckNodePort, a.healthOwner())
	}
}

// claimPrior re-claims the previous allocations that the spec still allows: an IP
// of a family the Service still has and did not request differently, a node port
// of a (protocol, port) still needing one and not requested, the health check port.
// It reports whether every claim it tried succeeded.
func (al *allocator) claimPrior(a *svcAlloc) bool {
	if a.prior == nil {
		return true
	}
	all := true
	for i, fam := range a.svc.Spec.IPFamilies[:len(a.ips)] {
		prior := priorIP(a.prior.ClusterIPs, fam)
		ip, err := netip.ParseAddr(prior)
		if err != nil || (a.ips[i] != "" && !sameIP(a.ips[i], ip)) {
			continue
		}
		_, err = al.ranges[fam].claim(ip, a.ipOwner())
		if err == nil && a.ips[i] == "" {
			a.ips[i] = prior
		}
		all = all && err == nil
	}
	svc := a.svc
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		if sp.NodePort != 0 || !shouldAllocateNodePorts(svc) || a.requestedFor(sp.Port) {
			continue
		}
		np := a.prior.NodePorts[nodePortKey(sp)]
		if np == 0 || a.userAsked(np) {
			continue
		}
		_, err := al.ports.claim(np, a.nodePortOwner(sp.Port))
		if err == nil {
			sp.NodePort = np
		}
		all = all && err == nil
	}
	hc := a.prior.HealthCheckNodePort
	if needsHealthCheck(svc) && svc.Spec.HealthCheckNodePort == 0 && hc != 0 && !a.userAsked(hc) {
		_, err := al.ports.claim(hc, a.healthOwner())
		if err == nil {
			svc.Spec.HealthCheckNodePort = hc
		}
		all = all && err == nil
	}
	return all
}

// claimRequested claims the user's spec.clusterIPs, nodePorts and
// healthCheckNodePort, with the apiserver's errors.
func (al *allocator) claimRequested(a *svcAlloc) error {
	for i, s := range a.ips {
		if s == "" {
			continue
		}
		ip, _ := netip.ParseAddr(s)
		r := al.ranges[a.svc.Spec.IPFamilies[i]]
		isNew, err := r.claim(ip, a.ipOwner())
		if err != nil {
			msg := fmt.Sprintf("failed to allocate IP %v: %v", s, err)
			return toError(field.ErrorList{field.Invalid(pathSpecClusterIPs, a.requested, msg)})
		}
		if isNew {
			a.claims = append(a.claims, claim{ip: r, addr: ip, owner: a.ipOwner()})
		}
	}
	if err := al.claimNodePorts(a); err != nil {
		return err
	}
	if hc := a.svc.Spec.HealthCheckNodePort; hc != 0 && needsHealthCheck(a.svc) {
		if err := al.claimPort(a, hc, a.healthOwner()); err != nil {
			return fmt.Errorf("failed to allocate requested HealthCheck NodePort %v: %w", hc, err)
		}
	}
	return nil
}

func (al *allocator) claimPort(a *svcAlloc, port int32, owner string) error {
	isNew, err := al.ports.claim(port, owner)
	if err == nil && isNew {
		a.claims = append(a.claims, claim{port: port, owner: owner})
	}
	return err
}

// allocateDynamic fills what is still empty: ClusterIPs, node ports, health check.
func (al *allocator) allocateDynamic(a *svcAlloc) error {
	for i, s := range a.ips {
		if s != "" {
			continue
		}
		fam := a.svc.Spec.IPFamilies[i]
		r := al.ranges[fam]
		ip, err := r.next(a.key+"/"+string(fam), a.ipOwner())
		if err != nil {
			return fmt.Errorf("failed to allocate a serviceIP for Service %q: %w", a.svc.Name, err)
		}
		a.claims = append(a.claims, claim{ip: r, addr: ip, owner: a.ipOwner()})
		a.ips[i] = ip.String()
	}
	if err := al.allocateNodePorts(a); err != nil {
		return err
	}
	svc := a.svc
	if needsHealthCheck(svc) && svc.Spec.HealthCheckNodePort == 0 {
		hc, err := al.ports.next(a.key+"/healthCheckNodePort", a.healthOwner())
		if err != nil {
			return fmt.Errorf("failed to allocate a HealthCheck NodePort: %w", err)
		}
		a.claims = append(a.claims, claim{port: hc, owner: a.healthOwner()})
		svc.Spec.HealthCheckNodePort = hc
	}
	return nil
}

// finish writes the allocated ClusterIPs into the spec.
func (a *svcAlloc) finish() {
	if a.ips == nil {
		return
	}
	a.svc.Spec.ClusterIPs = a.ips
	a.svc.Spec.ClusterIP = a.ips[0]
}

// stateEntry is what the State keeps of a successfully allocated Service.
func (a *svcAlloc) stateEntry() ServiceAlloc {
	s := ServiceAlloc{
		UID: string(a.svc.UID), Created: a.svc.CreationTimestamp.Time,
		HealthCheckNodePort: a.svc.Spec.HealthCheckNodePort,
	}
	s.ClusterIPs = append(s.ClusterIPs, a.ips...)
	if t := a.svc.Spec.Type; t == corev1.ServiceTypeNodePort || t == corev1.ServiceTypeLoadBalancer {
		for i := range a.svc.Spec.Ports {
			sp := &a.svc.Spec.Ports[i]
			if sp.NodePort == 0 {
				continue
			}
			if s.NodePorts == nil {
				s.NodePorts = map[string]int32{}
			}
			s.NodePorts[nodePortKey(sp)] = sp.NodePort
		}
	}
	return s
}

// nodePortKey is the State's key of a Service port: "PROTOCOL/port".
func nodePortKey(sp *corev1.ServicePort) string {
	return string(sp.Protocol) + "/" + strconv.Itoa(int(sp.Port))
}

// portOfKey returns the port number of a nodePortKey, 0 if malformed.
func portOfKey(k string) int32 {
	_, p, _ := strings.Cut(k, "/")
	n, _ := strconv.ParseInt(p, 10, 32)
	return int32(n)
}

func sameIP(s string, ip netip.Addr) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a == ip
}

// priorIP returns the first of ips of family fam, "" if none.
func priorIP(ips []string, fam corev1.IPFamily) string {
	for _, s := range ips {
		if familyOf(s) == fam {
			return s
		}
	}
	return ""
}
