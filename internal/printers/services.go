package printers

import (
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Services prints `kubectl get services`: NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE,
// and SELECTOR with Wide.
func Services(w io.Writer, svcs []*corev1.Service, opts Options) error {
	cols := []string{"NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"}
	if opts.Wide {
		cols = append(cols, "SELECTOR")
	}
	t := newTable(opts, true, cols...)
	for _, s := range svcs {
		cells := []string{s.Name, string(s.Spec.Type), clusterIP(s), externalIP(s, opts.Wide), servicePorts(s), age(s, opts.Now)}
		if opts.Wide {
			cells = append(cells, selector(s.Spec.Selector))
		}
		t.add(s, true, cells...)
	}
	return t.write(w, "services")
}

// clusterIP is kubectl's CLUSTER-IP: the primary ClusterIP only, also for a
// dual-stack Service (its IPs of both families are in -o yaml).
func clusterIP(s *corev1.Service) string {
	if len(s.Spec.ClusterIPs) > 0 {
		return s.Spec.ClusterIPs[0]
	}
	return orNone(s.Spec.ClusterIP)
}

// externalIP follows kubectl's getServiceExternalIP.
func externalIP(s *corev1.Service, wide bool) string {
	switch s.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(s.Spec.ExternalIPs) > 0 {
			return strings.Join(s.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		var ips []string
		for _, ing := range s.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				ips = append(ips, ing.IP)
			} else if ing.Hostname != "" {
				ips = append(ips, ing.Hostname)
			}
		}
		lb := strings.Join(ips, ",")
		if len(lb) > 16 && !wide {
			lb = lb[:13] + "..."
		}
		if len(s.Spec.ExternalIPs) > 0 {
			var all []string
			if lb != "" {
				all = strings.Split(lb, ",")
			}
			return strings.Join(append(all, s.Spec.ExternalIPs...), ",")
		}
		if lb != "" {
			return lb
		}
		return "<pending>"
	case corev1.ServiceTypeExternalName:
		return s.Spec.ExternalName
	}
	return "<unknown>"
}

func servicePorts(s *corev1.Service) string {
	var out []string
	for _, p := range s.Spec.Ports {
		if p.NodePort == 0 {
			out = append(out, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
		} else {
			out = append(out, fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol))
		}
	}
	if len(out) == 0 {
		return "<none>"
	}
	return strings.Join(out, ",")
}

func selector(sel map[string]string) string {
	if len(sel) == 0 {
		return "<none>"
	}
	return labels.SelectorFromSet(sel).String()
}
