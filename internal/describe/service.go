package describe

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Service returns kubectl describe's text of svc, given its EndpointSlices
// and its events.
func Service(svc *corev1.Service, slices []discoveryv1.EndpointSlice, events []corev1.Event, now time.Time) string {
	return tabbed(func(w writer) {
		s := &svc.Spec
		w.write(level0, "Name:\t%s\n", svc.Name)
		w.write(level0, "Namespace:\t%s\n", svc.Namespace)
		labelsBlock(w, "Labels", svc.Labels)
		annotationsBlock(w, "Annotations", svc.Annotations)
		w.write(level0, "Selector:\t%s\n", labels.FormatLabels(s.Selector))
		w.write(level0, "Type:\t%s\n", s.Type)
		if s.IPFamilyPolicy != nil {
			w.write(level0, "IP Family Policy:\t%s\n", *s.IPFamilyPolicy)
		}
		families := make([]string, len(s.IPFamilies))
		for i, f := range s.IPFamilies {
			families[i] = string(f)
		}
		w.write(level0, "IP Families:\t%s\n", orNone(strings.Join(families, ",")))
		w.write(level0, "IP:\t%s\n", s.ClusterIP)
		w.write(level0, "IPs:\t%s\n", orNone(strings.Join(s.ClusterIPs, ",")))
		if len(s.ExternalIPs) > 0 {
			w.write(level0, "External IPs:\t%v\n", strings.Join(s.ExternalIPs, ","))
		}
		if s.LoadBalancerIP != "" {
			w.write(level0, "Desired LoadBalancer IP:\t%s\n", s.LoadBalancerIP)
		}
		if s.ExternalName != "" {
			w.write(level0, "External Name:\t%s\n", s.ExternalName)
		}
		if ing := svc.Status.LoadBalancer.Ingress; len(ing) > 0 {
			w.write(level0, "LoadBalancer Ingress:\t%s\n", ingressList(ing))
		}
		for _, p := range s.Ports {
			name := p.Name
			if name == "" {
				name = "<unset>"
			}
			w.write(level0, "Port:\t%s\t%d/%s\n", name, p.Port, p.Protocol)
			if p.TargetPort.Type == intstr.Int {
				w.write(level0, "TargetPort:\t%d/%s\n", p.TargetPort.IntVal, p.Protocol)
			} else {
				w.write(level0, "TargetPort:\t%s/%s\n", p.TargetPort.StrVal, p.Protocol)
			}
			if p.AppProtocol != nil {
				w.write(level0, "AppProtocol:\t%s\n", *p.AppProtocol)
			}
			if p.NodePort != 0 {
				w.write(level0, "NodePort:\t%s\t%d/%s\n", name, p.NodePort, p.Protocol)
			}
			w.write(level0, "Endpoints:\t%s\n", readyEndpoints(slices, p.Name))
		}
		w.write(level0, "Session Affinity:\t%s\n", s.SessionAffinity)
		if s.ExternalTrafficPolicy != "" {
			w.write(level0, "External Traffic Policy:\t%s\n", s.ExternalTrafficPolicy)
		}
		if s.InternalTrafficPolicy != nil {
			w.write(level0, "Internal Traffic Policy:\t%s\n", *s.InternalTrafficPolicy)
		}
		if s.HealthCheckNodePort != 0 {
			w.write(level0, "HealthCheck NodePort:\t%d\n", s.HealthCheckNodePort)
		}
		if len(s.LoadBalancerSourceRanges) > 0 {
			w.write(level0, "LoadBalancer Source Ranges:\t%v\n", strings.Join(s.LoadBalancerSourceRanges, ","))
		}
		if s.TrafficDistribution != nil {
			w.write(level0, "Traffic Distribution:\t%s\n", *s.TrafficDistribution)
		}
		eventsTable(w, events, now)
	})
}

// ingressList is status.loadBalancer.ingress as describe shows it: each IP
// with its mode in parentheses, or the hostname.
func ingressList(ingress []corev1.LoadBalancerIngress) string {
	out := make([]string, len(ingress))
	for i, in := range ingress {
		switch {
		case in.IP != "" && in.IPMode != nil:
			out[i] = fmt.Sprintf("%s (%s)", in.IP, *in.IPMode)
		case in.IP != "":
			out[i] = in.IP
		default:
			out[i] = in.Hostname
		}
	}
	return strings.Join(out, ", ")
}

// maxEndpoints is how many endpoints a port's Endpoints line lists before
// "+ N more...".
const maxEndpoints = 3

// readyEndpoints lists the ready endpoints of the slices' port named port
// (ready unknown counts as ready) as ADDRESS:PORT: "<none>" without
// slices, the first three and "+ N more..." when there are more. A slice
// without ports (a headless Service's) lists its endpoints' addresses.
//
// As kubectl's, the list is cut once it holds three entries and another
// endpoint is met, ready or not, and N counts only the ready ones past
// the three.
func readyEndpoints(slices []discoveryv1.EndpointSlice, port string) string {
	if len(slices) == 0 {
		return "<none>"
	}
	var list []string
	more, count := false, 0
	add := func(ep discoveryv1.Endpoint, entry func() string) {
		if len(list) == maxEndpoints {
			more = true
		}
		if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
			return
		}
		if !more {
			list = append(list, entry())
		}
		count++
	}
	for _, sl := range slices {
		if len(sl.Ports) == 0 {
			for _, ep := range sl.Endpoints {
				add(ep, func() string { return ep.Addresses[0] })
			}
			continue
		}
		for _, p := range sl.Ports {
			if p.Name == nil || *p.Name != port || p.Port == nil {
				continue
			}
			for _, ep := range sl.Endpoints {
				add(ep, func() string { return net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(*p.Port))) })
			}
		}
	}
	out := strings.Join(list, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", out, count-maxEndpoints)
	}
	return out
}
