package podroutes

import "net/netip"

// Plan is what turns the routes svcnet has into the routes it wants.
type Plan struct {
	Delete  []Route // svcnet's routes no longer wanted (or duplicates)
	Replace []Route // wanted routes whose destination svcnet routes elsewhere
	Add     []Route // wanted routes svcnet has no route to
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return len(p.Delete)+len(p.Replace)+len(p.Add) == 0 }

// Diff plans the change from have (svcnet's routes, as Kernel.List returns
// them) to want (as Desired and Usable return them; one route per
// destination). A route in have that matches a wanted one exactly is kept; one
// to a wanted destination with another next hop is replaced in place (no gap
// in routing); every other route in have is deleted. Each list keeps the order
// of its input.
func Diff(want, have []Route) Plan {
	wanted := map[Route]Route{} // key: Dst and Via only
	byDst := map[netip.Prefix]Route{}
	for _, w := range want {
		wanted[Route{Dst: w.Dst, Via: w.Via}] = w
		byDst[w.Dst] = w
	}
	covered := map[netip.Prefix]bool{} // destinations already served by a kept or replaced route
	var rest []Route
	for _, h := range have {
		if _, ok := wanted[Route{Dst: h.Dst, Via: h.Via}]; ok && !covered[h.Dst] {
			covered[h.Dst] = true
			continue
		}
		rest = append(rest, h)
	}
	var p Plan
	for _, h := range rest {
		w, ok := byDst[h.Dst]
		if ok && !covered[h.Dst] {
			covered[h.Dst] = true
			p.Replace = append(p.Replace, w)
			continue
		}
		p.Delete = append(p.Delete, h)
	}
	for _, w := range want {
		if !covered[w.Dst] {
			covered[w.Dst] = true
			p.Add = append(p.Add, w)
		}
	}
	return p
}
