//lint:file-ignore SA1019 kubectl get lists v1 Endpoints (get ep), as kubectl does

package printers

import (
	"io"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Endpoints prints `kubectl get endpoints`: NAME ENDPOINTS AGE, the ready
// addresses with each port of their subset, at most three, then "+ N
// more...".
func Endpoints(w io.Writer, eps []*corev1.Endpoints, opts Options) error {
	t := newTable(opts, true, "NAME", "ENDPOINTS", "AGE")
	for _, e := range eps {
		t.add(e, true, e.Name, endpointsCell(e), age(e, opts.Now))
	}
	return t.write(w, "endpoints")
}

// endpointsCell is kubectl's ENDPOINTS cell: IP:PORT per address and port
// (IP alone in a subset without ports), three at most.
func endpointsCell(e *corev1.Endpoints) string {
	if len(e.Subsets) == 0 {
		return "<none>"
	}
	const max = 3
	var list []string
	count := 0
	for _, ss := range e.Subsets {
		if len(ss.Ports) == 0 {
			count += len(ss.Addresses)
			for _, a := range ss.Addresses {
				if len(list) == max {
					break
				}
				list = append(list, a.IP)
			}
			continue
		}
		for _, p := range ss.Ports {
			count += len(ss.Addresses)
			for _, a := range ss.Addresses {
				if len(list) == max {
					break
				}
				list = append(list, net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	if count > max {
		return strings.Join(list, ",") + " + " + strconv.Itoa(count-max) + " more..."
	}
	return strings.Join(list, ",")
}
