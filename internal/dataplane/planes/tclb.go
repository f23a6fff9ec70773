package planes

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"

	ebpfplane "github.com/svcnet/svcnet/internal/dataplane/ebpf"
	"github.com/svcnet/svcnet/internal/ebpf/tclb"
	"github.com/svcnet/svcnet/internal/servicetable"
	"golang.org/x/sys/unix"
)

// openTCLB opens the eBPF plane's tc load balancer for the node nc
// describes: on every interface of the caller's namespace that holds one of
// its NodePort addresses, with the first of them per family as the SNAT
// address, its pod networks and its masquerade mark; pinned under pinRoot
// (tclbPinDir) when it is not "". A node without NodePort addresses on an
// interface gets none (nil).
func openTCLB(nc servicetable.NodeConfig, pinRoot string) (ebpfplane.ExternalLB, error) {
	ifindexes, err := interfacesHolding(nc.NodePortAddresses)
	if err != nil || len(ifindexes) == 0 {
		return nil, err
	}
	cfg := tclb.Config{PodCIDRs: nc.ClusterCIDRs, MasqueradeMark: nc.Mark()}
	var have4, have6 bool
	for _, a := range nc.NodePortAddresses {
		if a.Is4() && !have4 {
			have4, cfg.SNAT = true, append(cfg.SNAT, a)
		} else if a.Is6() && !have6 {
			have6, cfg.SNAT = true, append(cfg.SNAT, a)
		}
	}
	var lb *tclb.LB
	if pinRoot == "" {
		lb, err = tclb.Open(cfg, tclb.Auto, ifindexes...)
	} else {
		var dir string
		if dir, err = tclbPinDir(pinRoot); err == nil {
			lb, err = tclb.OpenPinned(cfg, tclb.Auto, dir, ifindexes...)
		}
	}
	if err != nil {
		return nil, err
	}
	return lb, nil
}

// tclbPinDir is where the tc load balancer of the caller's network
// namespace is pinned under root: root/tclb-netns-<the namespace's inode>,
// so that proxies of different namespaces sharing a root never meet.
func tclbPinDir(root string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return "", fmt.Errorf("tclb: network namespace: %w", err)
	}
	return filepath.Join(root, fmt.Sprintf("tclb-netns-%d", st.Ino)), nil
}

// unpinTCLB removes the pins of the caller's namespace's tc load balancer
// under root, and the cls_bpf filters it left.
func unpinTCLB(root string) error {
	dir, err := tclbPinDir(root)
	if err != nil {
		return err
	}
	return tclb.Unpin(dir)
}

// interfacesHolding returns the indexes of the interfaces with one of addrs,
// sorted.
func interfacesHolding(addrs []netip.Addr) ([]int, error) {
	ifcs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("interfaces: %w", err)
	}
	var out []int
	for _, ifc := range ifcs {
		as, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w", ifc.Name, err)
		}
		for _, a := range as {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if ok && slices.Contains(addrs, ip.Unmap()) && ifc.Flags&net.FlagLoopback == 0 {
				out = append(out, ifc.Index)
				break
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
