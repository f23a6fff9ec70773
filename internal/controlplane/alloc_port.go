package controlplane

import "fmt"

// portRange allocates node ports (and healthCheckNodePorts) as the apiserver's
// port allocator does: the first offset ports (min(max(16, size/32), 128)) form a
// lower band kept for static requests, and dynamic allocation takes from the upper
// band first, starting at a seed-derived rather than a random position.
type portRange struct {
	r      PortRange
	size   int
	offset int
	used   map[int32]string
}

func newPortRange(r PortRange) *portRange {
	size := int(r.Last-r.First) + 1
	offset := 0
	if size > 16 {
		offset = min(max(16, size/32), 128)
	}
	return &portRange{r: r, size: size, offset: offset, used: map[int32]string{}}
}

func (p *portRange) contains(port int32) bool { return port >= p.r.First && port <= p.r.Last }

// claim allocates port for owner; claiming a port owner already holds succeeds
// with isNew false.
func (p *portRange) claim(port int32, owner string) (isNew bool, err error) {
	if !p.contains(port) {
		return false, fmt.Errorf("provided port is not in the valid range. The range of valid ports is %s", p.r)
	}
	switch held, ok := p.used[port]; {
	case !ok:
		p.used[port] = owner
		return true, nil
	case held == owner:
		return false, nil
	}
	return false, errPortAllocated
}

func (p *portRange) release(port int32, owner string) {
	if p.used[port] == owner {
		delete(p.used, port)
	}
}

// next allocates a free port for owner, upper band first. ErrRangeFull when none.
func (p *portRange) next(seed, owner string) (int32, error) {
	bands := []struct{ base, n int }{{p.offset, p.size - p.offset}, {0, p.offset}}
	for i, b := range bands {
		if b.n == 0 {
			continue
		}
		start := int(seed64(seed, fmt.Sprint(i)) % uint64(b.n))
		for j := 0; j < b.n; j++ {
			port := p.r.First + int32(b.base+(start+j)%b.n)
			if _, taken := p.used[port]; !taken {
				p.used[port] = owner
				return port, nil
			}
		}
	}
	return 0, ErrRangeFull
}
