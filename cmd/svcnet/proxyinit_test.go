package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/testbin"
)

// TestProxyInitOnly runs `svcnet proxy --init-only` as deploy/proxy's
// privileged init container does, in a network namespace of its own: it sets
// the namespace's conntrack sysctls and exits 0, leaving the machine-wide
// nf_conntrack_max to a warning. With /proc/sys read-only, as in an
// unprivileged container, it fails naming the sysctl it could not set,
// rather than let the proxy run with the kernel's CLOSE_WAIT timeout.
func TestProxyInitOnly(t *testing.T) {
	netnstest.RequireRoot(t)
	bin := filepath.Join(t.TempDir(), "svcnet")
	if err := testbin.Build(bin); err != nil {
		t.Fatal(err)
	}
	state := articleCopy(t)
	closeWait := "/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait"
	args := []string{"proxy", "--init-only", "--state", state, "--hostname-override", "node1", "--conntrack-tcp-timeout-close-wait", "1h15m0s"}

	ns := netnstest.New(t, "initonly")
	// nf_conntrack's sysctls appear in a namespace once conntrack is in use
	// there; the proxy's own table does that on a node.
	if out, err := ns.Command("nft", "add table ip t; add chain ip t c { type filter hook output priority 0; ct state new accept; }").CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	out, err := ns.Command(append([]string{bin}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("svcnet %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	got, err := ns.Command("cat", closeWait).Output()
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := strconv.Atoi(strings.TrimSpace(string(got))); v != 4500 {
		t.Errorf("%s in the namespace = %q after --init-only, want 4500\n%s", closeWait, got, out)
	}
	host, err := os.ReadFile(closeWait)
	if err == nil && strings.TrimSpace(string(host)) == "4500" {
		t.Errorf("the host's %s changed to 4500: --init-only must set the namespace's own", closeWait)
	}

	// An unprivileged container: /proc/sys read-only.
	ro := append([]string{"unshare", "-m", "sh", "-c", `mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && exec "$@"`, "sh", bin}, args...)
	ro[len(ro)-1] = "1h20m0s"
	out, err = ns.Command(ro...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--init-only") || !strings.Contains(string(out), "nf_conntrack_tcp_timeout_close_wait not set to 4800") {
		t.Errorf("--init-only with /proc/sys read-only: err %v, output:\n%s\nwant a failure naming nf_conntrack_tcp_timeout_close_wait", err, out)
	}
}
