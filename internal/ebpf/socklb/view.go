package socklb

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/svcnet/svcnet/internal/ebpf/bpfaddr"
	"github.com/svcnet/svcnet/internal/model"
)

// ErrNotAttached is returned by OpenAttached when no socket load balancer
// is attached to the cgroup.
var ErrNotAttached = errors.New("no socket load balancer attached")

// Names of the programs and maps as the kernel holds them (bpf/socklb.c;
// the kernel keeps the first 15 bytes of a name).
const (
	progConnect4 = "socklb_connect4"
	progConnect6 = "socklb_connect6"
	mapServices  = "services"
	mapBackends  = "backends"
)

// View reads the maps of a socket load balancer that another process (svcnet
// proxy --data-plane ebpf) attached to a cgroup: what a connect in that
// cgroup is translated to. It changes nothing.
type View struct {
	services, backends *ebpf.Map
}

// OpenAttached finds the socket load balancer attached to the cgroup v2
// directory cgroupPath (its connect4 and connect6 programs, attached to the
// directory itself, not inherited) and opens its maps for reading. Reading
// another process's programs and maps needs CAP_SYS_ADMIN. The error wraps
// ErrNotAttached when the cgroup has none, and says so when it has more than
// one.
func OpenAttached(cgroupPath string) (*View, error) {
	dir, err := os.Open(cgroupPath)
	if err != nil {
		return nil, fmt.Errorf("socklb: %w", err)
	}
	defer dir.Close()
	var ids [2]ebpf.MapID // services and backends of connect4's program
	for _, h := range []struct {
		attach ebpf.AttachType
		name   string
	}{{ebpf.AttachCGroupInet4Connect, progConnect4}, {ebpf.AttachCGroupInet6Connect, progConnect6}} {
		got, err := attachedMaps(int(dir.Fd()), h.attach, h.name)
		if err != nil {
			return nil, fmt.Errorf("socklb: cgroup %s: %w", cgroupPath, err)
		}
		if ids[0] == 0 {
			ids = got
		} else if got != ids {
			return nil, fmt.Errorf("socklb: cgroup %s: %s and %s read different maps: not one socket load balancer", cgroupPath, progConnect4, progConnect6)
		}
	}
	v := &View{}
	if v.services, err = ebpf.NewMapFromID(ids[0]); err != nil {
		return nil, fmt.Errorf("socklb: services map %d: %w", ids[0], err)
	}
	if v.backends, err = ebpf.NewMapFromID(ids[1]); err != nil {
		return nil, errors.Join(fmt.Errorf("socklb: backends map %d: %w", ids[1], err), v.Close())
	}
	return v, nil
}

// attachedMaps returns the IDs of the services and backends maps of the one
// program called name attached to the cgroup open as fd for attach.
func attachedMaps(fd int, attach ebpf.AttachType, name string) (ids [2]ebpf.MapID, err error) {
	res, err := link.QueryPrograms(link.QueryOptions{Target: fd, Attach: attach})
	if err != nil {
		return ids, fmt.Errorf("query %s programs: %w", attach, err)
	}
	found := 0
	for _, ap := range res.Programs {
		p, err := ebpf.NewProgramFromID(ap.ID)
		if err != nil {
			return ids, fmt.Errorf("%s program %d: %w", attach, ap.ID, err)
		}
		info, err := p.Info()
		p.Close()
		if err != nil {
			return ids, fmt.Errorf("%s program %d: %w", attach, ap.ID, err)
		}
		if info.Name != name {
			continue
		}
		found++
		mapIDs, ok := info.MapIDs()
		if !ok {
			return ids, fmt.Errorf("program %s (%d): the kernel does not name its maps", name, ap.ID)
		}
		if ids, err = servicesAndBackends(mapIDs); err != nil {
			return ids, fmt.Errorf("program %s (%d): %w", name, ap.ID, err)
		}
	}
	switch {
	case found == 0:
		return ids, fmt.Errorf("%w: no %s program", ErrNotAttached, name)
	case found > 1:
		return ids, fmt.Errorf("%d %s programs attached: more than one socket load balancer", found, name)
	}
	return ids, nil
}

// servicesAndBackends picks the services and backends maps among a
// program's maps, by name.
func servicesAndBackends(mapIDs []ebpf.MapID) (ids [2]ebpf.MapID, err error) {
	for _, id := range mapIDs {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			return ids, fmt.Errorf("map %d: %w", id, err)
		}
		info, err := m.Info()
		m.Close()
		if err != nil {
			return ids, fmt.Errorf("map %d: %w", id, err)
		}
		switch info.Name {
		case mapServices:
			ids[0] = id
		case mapBackends:
			ids[1] = id
		}
	}
	if ids[0] == 0 || ids[1] == 0 {
		return ids, fmt.Errorf("no %s and %s maps", mapServices, mapBackends)
	}
	return ids, nil
}

// Lookup returns what a connect to frontend of protocol proto is translated
// to: found false when the services map has no entry for it (the connect
// passes untouched), else its backends in slot order (none: the connect is
// refused with ECONNREFUSED). A read racing a change of the entry may see a
// backend slot already reaped: that is an error, not a shorter set.
func (v *View) Lookup(frontend netip.AddrPort, proto model.Protocol) (backends []netip.AddrPort, found bool, err error) {
	if err := bpfaddr.CheckFrontend(frontend, nil); err != nil {
		return nil, false, fmt.Errorf("socklb: lookup: %w", err)
	}
	p, err := bpfaddr.ProtoNumber(proto)
	if err != nil {
		return nil, false, fmt.Errorf("socklb: lookup %v: %w", frontend, err)
	}
	key := serviceKey(frontend, p)
	var sv socklbSvcValue
	if err := v.services.Lookup(&key, &sv); errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("socklb: lookup %v/%s: %w", frontend, proto, err)
	}
	if backends, err = readBackends(v.backends, sv.Base, sv.Count); err != nil {
		return nil, true, fmt.Errorf("socklb: lookup %v/%s: %w", frontend, proto, err)
	}
	return backends, true, nil
}

// Close releases the maps (the load balancer that owns them is untouched).
func (v *View) Close() error {
	var errs []error
	for _, m := range []*ebpf.Map{v.services, v.backends} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// readBackends reads the count backends from slot base on in the backends
// map m, in slot order (nil for none).
func readBackends(m *ebpf.Map, base, count uint32) ([]netip.AddrPort, error) {
	if count == 0 {
		return nil, nil
	}
	out := make([]netip.AddrPort, 0, count)
	for i := range count {
		slot := base + i
		var be socklbBackend
		if err := m.Lookup(&slot, &be); err != nil {
			return nil, fmt.Errorf("backend slot %d: %w", slot, err)
		}
		out = append(out, backendAddrPort(be))
	}
	return out, nil
}
