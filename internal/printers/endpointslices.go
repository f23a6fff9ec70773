package printers

import (
	"io"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// EndpointSlices prints `kubectl get endpointslices`: NAME ADDRESSTYPE PORTS ENDPOINTS AGE.
func EndpointSlices(w io.Writer, slices []*discoveryv1.EndpointSlice, opts Options) error {
	t := newTable(opts, true, "NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE")
	for _, s := range slices {
		t.add(s, true, s.Name, string(s.AddressType), slicePorts(s.Ports), sliceEndpoints(s.Endpoints), age(s, opts.Now))
	}
	return t.write(w, "endpointslices")
}

func slicePorts(ports []discoveryv1.EndpointPort) string {
	var list []string
	for _, p := range ports {
		if len(list) == 3 {
			break
		}
		switch {
		case p.Port != nil:
			list = append(list, strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			list = append(list, *p.Name)
		default:
			list = append(list, "*")
		}
	}
	return listWithMore(list, len(ports), 3)
}

func sliceEndpoints(eps []discoveryv1.Endpoint) string {
	var list []string
	count := 0
	for _, e := range eps {
		for _, a := range e.Addresses {
			if len(list) < 3 {
				list = append(list, a)
			}
			count++
		}
	}
	return listWithMore(list, count, 3)
}
