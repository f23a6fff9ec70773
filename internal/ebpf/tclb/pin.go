package tclb

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/svcnet/svcnet/internal/ebpf/bpfaddr"
	"github.com/svcnet/svcnet/internal/ebpf/pins"
	"github.com/svcnet/svcnet/internal/model"
)

// pinnedMaps are the maps OpenPinned pins: the frontends, their backends,
// the connection table and the node's settings.
var pinnedMaps = []string{"services", "backends", "maglev", "conns", "revnat", "node"}

// OpenPinned is Open with the maps and the tcx links pinned in pinDir, a
// directory of a BPF filesystem. If it holds the pins of an earlier load
// balancer (a proxy that exited or crashed: its programs stayed attached
// and kept translating), OpenPinned adopts them: its programs replace the
// old ones in the same links (clsact: the same filters), and the maps are
// kept as they are, so every connection made before keeps its backend.
// Pinned maps of another layout (a different build) are replaced. Links
// pinned for interfaces not in ifindexes are unpinned (detached). Held
// says what an adopted load balancer holds.
func OpenPinned(cfg Config, mode Mode, pinDir string, ifindexes ...int) (*LB, error) {
	if err := pins.CheckBPFFS(pinDir); err != nil {
		return nil, fmt.Errorf("tclb: %w", err)
	}
	if err := os.MkdirAll(pinDir, 0o700); err != nil {
		return nil, fmt.Errorf("tclb: pins: %w", err)
	}
	return open(cfg, mode, pinDir, ifindexes)
}

// Unpin removes the pins in pinDir and the cls_bpf filters a load balancer
// left on the interfaces of the calling thread's network namespace: its
// programs are detached and its maps freed once no process holds them. No
// pins is not an error.
func Unpin(pinDir string) error {
	var errs []error
	if err := os.RemoveAll(pinDir); err != nil {
		errs = append(errs, fmt.Errorf("tclb: unpin: %w", err))
	}
	links, err := netlink.LinkList()
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("tclb: unpin: interfaces: %w", err))...)
	}
	for _, l := range links {
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fs, err := netlink.FilterList(l, parent)
			if err != nil {
				continue // no clsact qdisc on the interface
			}
			for _, f := range fs {
				if bf, ok := f.(*netlink.BpfFilter); ok && strings.HasPrefix(bf.Name, filterName) {
					if err := netlink.FilterDel(bf); err != nil {
						errs = append(errs, fmt.Errorf("tclb: unpin: filter on %s: %w", l.Attrs().Name, err))
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// load loads the programs and maps, the maps pinned by name in pinDir (when
// not ""): existing pins of the same layout are reused, others replaced.
func (lb *LB) load(pinDir string) error {
	spec, err := loadTclb()
	if err == nil {
		err = pins.Load(spec, pinnedMaps, pinDir, &lb.objs)
	}
	if err != nil {
		return fmt.Errorf("tclb: load: %w", err)
	}
	return nil
}

// unpinOthers removes the pinned links in pinDir of interfaces not in
// ifindexes.
func unpinOthers(pinDir string, ifindexes []int) error {
	ents, err := os.ReadDir(pinDir)
	if err != nil {
		return fmt.Errorf("pins: %w", err)
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "link-")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, "-")
		if i, err := strconv.Atoi(n); err == nil && slices.Contains(ifindexes, i) {
			continue
		}
		if err := os.Remove(filepath.Join(pinDir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("unpin %s: %w", e.Name(), err)
		}
	}
	return nil
}

// adopt rebuilds the held frontends from maps an earlier load balancer
// left.
func (lb *LB) adopt() error {
	var k tclbSvcKey
	var v tclbSvcValue
	it := lb.objs.Services.Iterate()
	for it.Next(&k, &v) {
		lb.svcs[k] = v.Count
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("services: %w", err)
	}
	return nil
}

// Held is one frontend the load balancer holds.
type Held struct {
	Frontend netip.AddrPort
	Protocol model.Protocol
	Backends []Backend
	Policy   Policy
}

// Held returns every frontend the load balancer holds (for an adopted one,
// what the earlier one left), sorted by frontend then protocol.
func (lb *LB) Held() ([]Held, error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	out := make([]Held, 0, len(lb.svcs))
	for k, n := range lb.svcs {
		proto, err := bpfaddr.Protocol(k.Proto)
		if err != nil {
			return nil, fmt.Errorf("tclb: held: %w", err)
		}
		h := Held{Frontend: netip.AddrPortFrom(bpfaddr.Addr(k.Addr), bpfaddr.Port(k.Port)), Protocol: proto}
		var ok bool
		if h.Backends, h.Policy, ok, err = readService(lb.objs.Services, lb.objs.Backends, k); err != nil {
			return nil, fmt.Errorf("tclb: held %v/%s: %w", h.Frontend, proto, err)
		} else if !ok || len(h.Backends) != int(n) {
			return nil, fmt.Errorf("tclb: held %v/%s: the maps changed under the load balancer", h.Frontend, proto)
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Held) int {
		if c := a.Frontend.Compare(b.Frontend); c != 0 {
			return c
		}
		return strings.Compare(string(a.Protocol), string(b.Protocol))
	})
	return out, nil
}
