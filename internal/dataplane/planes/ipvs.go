package planes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// IPVS is kube-proxy's IPVS mode's --data-plane value, which svcnet answers
// with why it has no such plane (IPVSRefusal) rather than "unknown value".
const IPVS = "ipvs"

// IPVSRefusal is why svcnet has no IPVS data plane. Upstream deprecated
// kube-proxy's IPVS mode (KEP-5495: a warning from v1.35, behind the
// KubeProxyIPVS feature gate from v1.37) for the nftables mode, which solves
// the performance problems IPVS was introduced for; an untested backend for
// a kernel module that the machines svcnet is tested on do not have would be
// a promise nobody keeps. The schedulers people chose IPVS for come with the
// eBPF data plane instead. kernel says whether this kernel has IP_VS.
func IPVSRefusal(kernel string) error {
	return fmt.Errorf("--data-plane %s: svcnet has no IPVS data plane: upstream kube-proxy deprecated its IPVS mode "+
		"(KEP-5495, v1.35) in favour of nftables, which svcnet runs by default (--data-plane %s); IPVS's schedulers "+
		"(round robin, least connection, source hash) come with the eBPF data plane; %s", IPVS, Default, kernel)
}

// ipvsKernel describes whether the kernel under root ("/" on a node) has
// IP_VS: loaded (/proc/net/ip_vs), built in, or loadable as a module of the
// running release.
func ipvsKernel(root, release string) string {
	if _, err := os.Stat(filepath.Join(root, "proc/net/ip_vs")); err == nil {
		return "this kernel has IP_VS loaded"
	}
	mods := filepath.Join(root, "lib/modules", release)
	for _, f := range []string{"modules.builtin", "modules.dep"} {
		b, err := os.ReadFile(filepath.Join(mods, f))
		if err == nil && strings.Contains(string(b), "/ip_vs.ko") {
			return "this kernel has IP_VS as a module"
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Sprintf("whether this kernel has IP_VS is unknown (%v)", err)
		}
	}
	return "this kernel has no IP_VS (no /proc/net/ip_vs, no ip_vs module for " + release + ")"
}

// kernelRelease returns the running kernel's release (uname -r).
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}
