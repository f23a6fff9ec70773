package nodecluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/svcnet/svcnet/internal/lab/topology"
)

// A node's containerd, its shims and its kubelet share one mount namespace and
// one UTS namespace, made by the node's holder process (a shell that sets the
// mounts up and then sleeps) inside the node's network namespace. The mounts
// keep the fixed paths of the runtime and the kubelet off the host, each
// node's to itself, all under the node's directory, FS below:
//
//	/sys             a fresh sysfs (so /sys/class/net is the node's), with the
//	                 host's cgroup hierarchies bound back at /sys/fs/cgroup
//	/run             a tmpfs of the node's (containerd's state and socket,
//	                 the Pods' network namespaces under /run/netns, NRI)
//	/var/lib         FS/var-lib (kubelet, containerd, cni)
//	/var/log         FS/var-log (pods, containers)
//	/opt             FS/opt (CNI plugins in /opt/cni/bin)
//	/etc             the host's /etc with FS/etc-upper over it (overlay):
//	                 hostname, hosts, resolv.conf of the node
//	/etc/cni/net.d   FS/cni-net.d (CNI configuration)
//	/proc/sys/...    the kernel settings the kubelet checks (see kernelDefaults)
//
// Nothing is mounted in the host's mount namespace: the node's mounts vanish
// with its last process.

// fsDir is where a node's own file systems live.
func fsDir(nodeDir string) string { return filepath.Join(nodeDir, "fs") }

// kernelDefaults are the global kernel settings the kubelet wants
// (pkg/kubelet/cm setupKernelTunables): with protectKernelDefaults: false it
// would write them into the host's kernel (kernel.panic_on_oops=1 on a
// shared machine), with true it refuses to start when they differ. Each node
// sees these values through a read-only file bound over the setting, so the
// kubelet runs with protectKernelDefaults: true and the host keeps its own.
var kernelDefaults = []struct{ key, value string }{
	{"vm/overcommit_memory", "1"},
	{"vm/panic_on_oom", "0"},
	{"kernel/panic", "10"},
	{"kernel/panic_on_oops", "1"},
	{"kernel/keys/root_maxkeys", "1000000"},
	{"kernel/keys/root_maxbytes", "25000000"},
}

// holderScript sets up the node's mounts and hostname, marks FS/ready, and
// sleeps: its process holds the namespaces. $1 is FS, $2 the hostname.
const holderScript = `set -eu
fs=$1
echo "$2" > /proc/sys/kernel/hostname
mount --rbind /sys/fs/cgroup "$fs/cgroup"
umount -l /sys
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
mount --move "$fs/cgroup" /sys/fs/cgroup
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
mount --bind "$fs/var-lib" /var/lib
mount --bind "$fs/var-log" /var/log
mount --bind "$fs/opt" /opt
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$fs/etc-upper,workdir=$fs/etc-work" /etc
mount --bind "$fs/cni-net.d" /etc/cni/net.d
for f in "$fs"/sysctl/*; do
  mount -o bind,ro "$f" "/proc/sys/$(basename "$f" | tr . /)"
done
: > "$fs/ready"
exec sleep infinity
`

// prepareNodeFS makes the directories and files the holder script mounts.
func prepareNodeFS(nodeDir string, n Node) error {
	fs := fsDir(nodeDir)
	for _, d := range []string{"cgroup", "var-lib", "var-log", "opt/cni/bin", "etc-upper/cni/net.d", "etc-work", "cni-net.d", "sysctl", "tmp"} {
		if err := os.MkdirAll(filepath.Join(fs, d), 0o755); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	files := map[string]string{
		"etc-upper/hostname": n.Name + "\n",
		"etc-upper/hosts": fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n",
			n.Addr, n.Name),
		// No name server answers on the lab's gateway: names outside the
		// cluster do not resolve, and no query leaves the lab.
		"etc-upper/resolv.conf": fmt.Sprintf("nameserver %s\n", topology.Gateway),
	}
	for _, kd := range kernelDefaults {
		files["sysctl/"+strings.ReplaceAll(kd.key, "/", ".")] = kd.value + "\n"
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(fs, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}
