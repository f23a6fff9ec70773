package link

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
)

// ErrNetNS is returned (wrapped) when the pod's namespace cannot be opened.
var ErrNetNS = errors.New("cannot open network namespace")

// CheckNetNS reports whether path is a network namespace (a file of nsfs,
// or of procfs on kernels before 3.19, as /proc/PID/ns/net and the bind
// mounts under /run/netns are) without opening it, so that a FIFO or a
// device named by CNI_NETNS is never opened. The error wraps ErrNetNS, and
// also fs.ErrNotExist when nothing is there.
func CheckNetNS(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fmt.Errorf("%w %s: %w", ErrNetNS, path, err)
	}
	return nsfsType(path, int64(st.Type))
}

func nsfsType(path string, t int64) error {
	if t != unix.NSFS_MAGIC && t != unix.PROC_SUPER_MAGIC {
		return fmt.Errorf("%w %s: not a network namespace (file system 0x%x)", ErrNetNS, path, t)
	}
	return nil
}

// openNS opens the network namespace at path, refusing any other file
// (checked before the open by CheckNetNS, and after it on the descriptor, so
// a path swapped in between is refused too). The error wraps ErrNetNS.
func openNS(path string) (*netns.NS, error) {
	if err := CheckNetNS(path); err != nil {
		return nil, err
	}
	ns, err := netns.OpenPath(path)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrNetNS, path, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(ns.Fd(), &st); err != nil {
		ns.Close()
		return nil, fmt.Errorf("%w %s: %w", ErrNetNS, path, err)
	}
	if err := nsfsType(path, int64(st.Type)); err != nil {
		ns.Close()
		return nil, err
	}
	return ns, nil
}

// inPod runs fn with a netlink handle inside the pod's namespace, on a
// thread of its own (internal/netns), so fn may also write the pod's sysctls.
func inPod(ns *netns.NS, fn func(h *netlink.Handle) error) error {
	return ns.Do(func() error {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("netlink in %s: %w", ns.Path(), err)
		}
		defer h.Close()
		return fn(h)
	})
}

// AttachPod makes the veth pair of spec and configures both ends: the node
// end (spec.HostVeth) joins the bridge with hairpin mode, spec.MTU and is up;
// the pod end is spec.IfName in spec.NetNS with spec.MTU, spec.Addrs (IPv6
// without DAD), spec.Routes, redirects ignored, up, and the pod's loopback is
// up. It returns both ends.
//
// Idempotence: when the pod already has spec.IfName with spec.Alias and the
// node has spec.HostVeth, the pair is reused and reconfigured. A pod
// interface of that name with another alias is someone else's: the error
// wraps ErrExists and nothing changes; so is a node link named spec.HostVeth
// with another alias (the error wraps ErrNodeEndTaken). A half pair (one end
// missing) is replaced.
func (n *Node) AttachPod(spec PodSpec) (host, pod Info, err error) {
	br, err := n.h.LinkByName(spec.Bridge)
	if err != nil {
		return Info{}, Info{}, fmt.Errorf("bridge %s: %w", spec.Bridge, err)
	}
	ns, err := openNS(spec.NetNS)
	if err != nil {
		return Info{}, Info{}, err
	}
	defer ns.Close()

	var podAlias string
	podExists := false
	if err := inPod(ns, func(h *netlink.Handle) error {
		l, err := h.LinkByName(spec.IfName)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		podExists, podAlias = true, l.Attrs().Alias
		return nil
	}); err != nil {
		return Info{}, Info{}, fmt.Errorf("pod interface %s: %w", spec.IfName, err)
	}
	if podExists && podAlias != spec.Alias {
		return Info{}, Info{}, fmt.Errorf("%s in %s: %w", spec.IfName, spec.NetNS, ErrExists)
	}
	hostLink, err := n.h.LinkByName(spec.HostVeth)
	hostExists := err == nil
	if err != nil && !isNotFound(err) {
		return Info{}, Info{}, fmt.Errorf("link %s: %w", spec.HostVeth, err)
	}
	if hostExists && hostLink.Attrs().Alias != spec.Alias {
		// Another attachment's node end, whose name hashes alike, or a
		// link the plugin did not make: never reused, never deleted.
		return Info{}, Info{}, fmt.Errorf("node end %s belongs to %q: %w", spec.HostVeth, hostLink.Attrs().Alias, ErrNodeEndTaken)
	}
	if !(podExists && hostExists) {
		if hostExists {
			if err := n.h.LinkDel(hostLink); err != nil {
				return Info{}, Info{}, fmt.Errorf("delete stale %s: %w", spec.HostVeth, err)
			}
		}
		if podExists {
			if err := inPod(ns, func(h *netlink.Handle) error { return delIfAlias(h, spec.IfName, spec.Alias) }); err != nil {
				return Info{}, Info{}, fmt.Errorf("delete stale %s: %w", spec.IfName, err)
			}
		}
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MTU, attrs.Alias = spec.HostVeth, spec.MTU, spec.Alias
		veth := netlink.NewVeth(attrs)
		veth.PeerName, veth.PeerMTU, veth.PeerNamespace = spec.IfName, uint32(spec.MTU), netlink.NsFd(ns.Fd())
		if err := n.h.LinkAdd(veth); err != nil {
			return Info{}, Info{}, fmt.Errorf("create veth %s (peer %s): %w", spec.HostVeth, spec.IfName, err)
		}
	}
	if hostLink, err = n.h.LinkByName(spec.HostVeth); err != nil {
		return Info{}, Info{}, fmt.Errorf("link %s: %w", spec.HostVeth, err)
	}
	if err := n.configureHost(hostLink, br, spec); err != nil {
		return Info{}, Info{}, err
	}
	if err := inPod(ns, func(h *netlink.Handle) error {
		var err error
		pod, err = configurePod(h, spec)
		return err
	}); err != nil {
		return Info{}, Info{}, err
	}
	if hostLink, err = n.h.LinkByName(spec.HostVeth); err != nil {
		return Info{}, Info{}, fmt.Errorf("link %s: %w", spec.HostVeth, err)
	}
	return infoOf(hostLink), pod, nil
}

func (n *Node) configureHost(l, br netlink.Link, spec PodSpec) error {
	name := spec.HostVeth
	if l.Attrs().Alias != spec.Alias {
		if err := n.h.LinkSetAlias(l, spec.Alias); err != nil {
			return fmt.Errorf("link %s: set alias: %w", name, err)
		}
	}
	if l.Attrs().MTU != spec.MTU {
		if err := n.h.LinkSetMTU(l, spec.MTU); err != nil {
			return fmt.Errorf("link %s: set mtu %d: %w", name, spec.MTU, err)
		}
	}
	if l.Attrs().MasterIndex != br.Attrs().Index {
		if err := n.h.LinkSetMaster(l, br); err != nil {
			return fmt.Errorf("link %s: join bridge %s: %w", name, spec.Bridge, err)
		}
	}
	if err := n.h.LinkSetHairpin(l, true); err != nil {
		return fmt.Errorf("link %s: hairpin: %w", name, err)
	}
	if err := n.h.LinkSetUp(l); err != nil {
		return fmt.Errorf("link %s: set up: %w", name, err)
	}
	return nil
}

// configurePod configures the pod end; it runs inside the pod's namespace.
func configurePod(h *netlink.Handle, spec PodSpec) (Info, error) {
	name := spec.IfName
	lo, err := h.LinkByName("lo")
	if err != nil {
		return Info{}, fmt.Errorf("pod loopback: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return Info{}, fmt.Errorf("pod loopback: set up: %w", err)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		return Info{}, fmt.Errorf("pod interface %s: %w", name, err)
	}
	// Every packet goes through the node, even to a pod on the same bridge:
	// the node's redirects ("go there directly") must not be obeyed.
	if err := sysctl("0", "net/ipv4/conf/all/accept_redirects"); err != nil {
		return Info{}, fmt.Errorf("pod: %w", err)
	}
	if err := sysctl("0", "net/ipv4/conf", name, "accept_redirects"); err != nil {
		return Info{}, fmt.Errorf("pod: %w", err)
	}
	for _, p := range spec.Addrs {
		if p.Addr().Is6() {
			for _, key := range []string{"accept_dad", "accept_redirects"} {
				if err := sysctl("0", "net/ipv6/conf", name, key); err != nil {
					return Info{}, fmt.Errorf("pod: %w", err)
				}
			}
			break
		}
	}
	if l.Attrs().Alias != spec.Alias {
		if err := h.LinkSetAlias(l, spec.Alias); err != nil {
			return Info{}, fmt.Errorf("pod interface %s: set alias: %w", name, err)
		}
	}
	if l.Attrs().MTU != spec.MTU {
		if err := h.LinkSetMTU(l, spec.MTU); err != nil {
			return Info{}, fmt.Errorf("pod interface %s: set mtu %d: %w", name, spec.MTU, err)
		}
	}
	for _, p := range spec.Addrs {
		a := &netlink.Addr{IPNet: ipNet(p)}
		if p.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrReplace(l, a); err != nil {
			return Info{}, fmt.Errorf("pod interface %s: address %s: %w", name, p, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return Info{}, fmt.Errorf("pod interface %s: set up: %w", name, err)
	}
	for _, r := range spec.Routes {
		nr := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipNet(r.Dst), Scope: netlink.SCOPE_UNIVERSE}
		if r.GW.IsValid() {
			nr.Gw = net.IP(r.GW.AsSlice())
		} else {
			nr.Scope = netlink.SCOPE_LINK
		}
		if r.OnLink {
			nr.Flags = int(netlink.FLAG_ONLINK)
		}
		if err := h.RouteReplace(nr); err != nil {
			return Info{}, fmt.Errorf("pod interface %s: route %s: %w", name, r, err)
		}
	}
	if l, err = h.LinkByName(name); err != nil {
		return Info{}, fmt.Errorf("pod interface %s: %w", name, err)
	}
	return infoOf(l), nil
}

// delIfAlias deletes link name when its alias is alias (a link of someone
// else is left alone); a missing link is not an error.
func delIfAlias(h *netlink.Handle, name, alias string) error {
	l, err := h.LinkByName(name)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if l.Attrs().Alias != alias {
		return nil
	}
	if err := h.LinkDel(l); err != nil && !isNotFound(err) && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

// DetachPod removes an attachment's veth pair: the node end hostVeth, and the
// pod end ifname in netnsPath if the pair is somehow split. Only links whose
// alias is alias are deleted (the node end gets it when it is created, so a
// crash cannot leave it without one). A missing link, an empty netnsPath
// or a namespace that is gone is not an error: DEL must succeed then.
func (n *Node) DetachPod(hostVeth, netnsPath, ifname, alias string) error {
	if err := delIfAlias(n.h, hostVeth, alias); err != nil {
		return fmt.Errorf("node end %s: %w", hostVeth, err)
	}
	if netnsPath == "" {
		return nil
	}
	ns, err := openNS(netnsPath)
	if err != nil {
		// The namespace is gone, and its interfaces with it (what is at
		// the path now, if anything, is not a namespace and is left alone).
		return nil
	}
	defer ns.Close()
	if err := inPod(ns, func(h *netlink.Handle) error { return delIfAlias(h, ifname, alias) }); err != nil {
		return fmt.Errorf("pod end %s in %s: %w", ifname, netnsPath, err)
	}
	return nil
}

// InspectPod reads the pod side of an attachment: interface ifname in
// netnsPath with its addresses and main-table routes, and the loopback's
// state. A missing interface is an error wrapping ErrNotFound.
func InspectPod(netnsPath, ifname string) (PodState, error) {
	ns, err := openNS(netnsPath)
	if err != nil {
		return PodState{}, err
	}
	defer ns.Close()
	var st PodState
	err = inPod(ns, func(h *netlink.Handle) error {
		if lo, err := h.LinkByName("lo"); err == nil {
			st.LoopbackUp = lo.Attrs().Flags&net.FlagUp != 0
		}
		l, err := h.LinkByName(ifname)
		if isNotFound(err) {
			return fmt.Errorf("interface %s in %s: %w", ifname, netnsPath, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("interface %s in %s: %w", ifname, netnsPath, err)
		}
		st.Link = infoOf(l)
		if st.Addrs, err = addrsOf(h, l); err != nil {
			return err
		}
		rs, err := retryDump(func() ([]netlink.Route, error) { return h.RouteList(l, netlink.FAMILY_ALL) })
		if err != nil {
			return fmt.Errorf("routes of %s: %w", ifname, err)
		}
		for _, r := range rs {
			if r.Table != unix.RT_TABLE_MAIN {
				continue
			}
			dst, ok := prefixOf(r.Dst)
			if !ok {
				continue
			}
			rt := Route{Dst: dst, OnLink: r.Flags&int(netlink.FLAG_ONLINK) != 0}
			if gw, ok := netip.AddrFromSlice(r.Gw); ok {
				rt.GW = gw.Unmap()
			}
			st.Routes = append(st.Routes, rt)
		}
		return nil
	})
	return st, err
}
