package socklb

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ebpf/pins"
	"github.com/svcnet/svcnet/internal/model"
)

// pinnedMaps are the maps OpenPinned pins: the Services, their backends and
// the reverse translations of live sockets.
var pinnedMaps = []string{"services", "backends", "revnat", "udp_revnat", "affinity", "lc_conns"}

// OpenPinned is Open with the maps and the cgroup attachments (BPF links)
// pinned in PinDir(root, cgroupPath), a directory of a BPF filesystem. If
// that directory holds the pins of an earlier load balancer (a proxy that
// exited or crashed), OpenPinned adopts them: its programs replace the old
// ones in the same links, atomically, so every connect in between was
// translated by one or the other, and the maps are kept as they are, with
// the reverse translations of sockets made before (getpeername and recvmsg
// keep answering for them). Pinned maps of another layout (a different
// build) are replaced by new ones. Held says what an adopted load balancer
// holds.
func OpenPinned(cgroupPath, root string) (*LB, error) {
	dir, err := PinDir(root, cgroupPath)
	if err != nil {
		return nil, err
	}
	if err := pins.CheckBPFFS(root); err != nil {
		return nil, fmt.Errorf("socklb: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("socklb: pins: %w", err)
	}
	return open(cgroupPath, dir)
}

// PinDir is where OpenPinned pins the load balancer of cgroupPath under
// root: root/cgroup-<the cgroup's ID>, so load balancers of different
// cgroups sharing a root never meet.
func PinDir(root, cgroupPath string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(cgroupPath, &st); err != nil {
		return "", fmt.Errorf("socklb: cgroup %s: %w", cgroupPath, err)
	}
	return filepath.Join(root, fmt.Sprintf("cgroup-%d", st.Ino)), nil
}

// Unpin removes the pins of the load balancer of cgroupPath under root: its
// programs are detached and its maps freed once no process holds them. The
// kernel drops a pinned link an RCU grace period after its pin is removed,
// so Unpin waits, up to unpinWait, until no load balancer is attached to
// the cgroup, and fails, saying so, when one still is (a process holds it:
// a svcnet proxy still running). No pins is not an error.
func Unpin(root, cgroupPath string) error {
	dir, err := PinDir(root, cgroupPath)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("socklb: unpin: %w", err)
	}
	deadline := time.Now().Add(unpinWait)
	for {
		v, err := OpenAttached(cgroupPath)
		if errors.Is(err, ErrNotAttached) {
			return nil
		}
		if err == nil {
			v.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("socklb: unpin: a load balancer is still attached to %s %v after its pins were removed: a process holds it (a svcnet proxy still running?)", cgroupPath, unpinWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// unpinWait bounds Unpin's wait for the links to go.
const unpinWait = 2 * time.Second

// load loads the programs and maps, the maps pinned by name in pinDir (when
// not ""): existing pins of the same layout are reused, others replaced.
func (lb *LB) load(pinDir string) error {
	spec, err := loadSocklb()
	if err == nil {
		err = pins.Load(spec, pinnedMaps, pinDir, &lb.objs)
	}
	if err != nil {
		return fmt.Errorf("socklb: load: %w", err)
	}
	return nil
}

// attach attaches prog to the cgroup's hook typ. With pinDir, the link is
// pinned there, and a link pinned by an earlier load balancer is updated to
// prog instead (no moment without a program).
func attach(cgroupPath, pinDir string, prog *ebpf.Program, typ ebpf.AttachType) (link.Link, error) {
	if pinDir == "" {
		return link.AttachCgroup(link.CgroupOptions{Path: cgroupPath, Attach: typ, Program: prog})
	}
	info, err := prog.Info()
	if err != nil {
		return nil, err
	}
	return pins.Link(filepath.Join(pinDir, "link-"+info.Name), prog, func() (link.Link, error) {
		return link.AttachCgroup(link.CgroupOptions{Path: cgroupPath, Attach: typ, Program: prog})
	})
}

// adopt rebuilds the in-memory state from maps an earlier load balancer
// left: each services entry's slot range is live; a backend slot no entry
// points to was retired and not yet reaped, and is retired again (a connect
// of the old programs may still read it).
func (lb *LB) adopt() error {
	var (
		k       socklbSvcKey
		v       socklbSvcValue
		maxEnd  uint64
		covered = map[uint32]bool{}
	)
	it := lb.objs.Services.Iterate()
	for it.Next(&k, &v) {
		lb.svcs[k] = svcState{base: v.Base, count: v.Count, affinitySec: v.AffinitySec, sched: v.Sched}
		if v.Count == 0 {
			continue
		}
		lb.slots.adopt(v.Base, v.Count)
		maxEnd = max(maxEnd, uint64(v.Base)+uint64(v.Count))
		for i := range v.Count {
			covered[v.Base+i] = true
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("services: %w", err)
	}
	var (
		slot uint32
		be   socklbBackend
	)
	bit := lb.objs.Backends.Iterate()
	for bit.Next(&slot, &be) {
		if !covered[slot] {
			lb.slots.adopt(slot, 1)
			lb.retired = append(lb.retired, svcState{base: slot, count: 1})
			maxEnd = max(maxEnd, uint64(slot)+1)
		}
	}
	if err := bit.Err(); err != nil {
		return fmt.Errorf("backends: %w", err)
	}
	lb.slots.cursorAfter(maxEnd)
	return nil
}

// Held is one frontend a load balancer holds: its protocol, backends
// (empty: connects are refused) and policy (its Scheduler always set).
type Held struct {
	Frontend netip.AddrPort
	Protocol model.Protocol
	Backends []netip.AddrPort
	Policy   Policy
}

// Held returns every frontend the load balancer holds (for an adopted one,
// what the earlier one left), sorted by frontend then protocol, the
// backends of each in slot order.
func (lb *LB) Held() ([]Held, error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	out := make([]Held, 0, len(lb.svcs))
	for k, s := range lb.svcs {
		h, err := heldOf(k)
		if err != nil {
			return nil, err
		}
		h.Policy = Policy{Scheduler: schedOf(s.sched), Affinity: time.Duration(s.affinitySec) * time.Second}
		if h.Backends, err = readBackends(lb.objs.Backends, s.base, s.count); err != nil {
			return nil, fmt.Errorf("socklb: held %v/%s: %w", h.Frontend, h.Protocol, err)
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
