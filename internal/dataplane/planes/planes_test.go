package planes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/dataplane"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/servicetable"
)

func TestNames(t *testing.T) {
	if got := strings.Join(Names(), ","); got != "nftables,iptables,userspace,ebpf,none" {
		t.Errorf("Names() = %s, want nftables,iptables,userspace,ebpf,none", got)
	}
	if Default != "nftables" {
		t.Errorf("Default = %s", Default)
	}
	for _, n := range Names() {
		if err := Validate(n); err != nil {
			t.Errorf("Validate(%s) = %v", n, err)
		}
	}
	for _, c := range []struct{ name, want string }{
		{"iptables-legacy", `--data-plane "iptables-legacy": want nftables, iptables, userspace, ebpf or none`},
		{"", `--data-plane "": want nftables, iptables, userspace, ebpf or none`},
	} {
		if err := Validate(c.name); err == nil || err.Error() != c.want {
			t.Errorf("Validate(%q) = %v, want %s", c.name, err, c.want)
		}
		if _, _, err := Open(c.name, Options{}); err == nil || err.Error() != c.want {
			t.Errorf("Open(%q) = %v, want %s", c.name, err, c.want)
		}
	}
	if _, _, err := Open(None, Options{}); err == nil || !strings.Contains(err.Error(), "no Service data plane") {
		t.Errorf("Open(none) = %v, want a refusal", err)
	}
}

// run runs fn on a thread in ns.
func run(t *testing.T, ns *netns.NS, fn func() error) {
	t.Helper()
	if err := ns.Do(fn); err != nil {
		t.Fatal(err)
	}
}

func nftList(t *testing.T, ns *netns.NS) string {
	t.Helper()
	out, err := ns.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestOpenSyncCleanup opens the default plane in a namespace, probes the
// kernel's features (leaving nothing behind), programs an
// empty service table, sees a foreign commit through Changed, and removes
// everything with Cleanup, leaving the foreign table alone.
func TestOpenSyncCleanup(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t, "planes")
	ctx := context.Background()
	var plane dataplane.DataPlane
	var closeFn func() error
	run(t, ns, func() (err error) {
		plane, closeFn, err = Open(Default, Options{})
		return err
	})
	defer func() {
		if err := closeFn(); err != nil {
			t.Error(err)
		}
	}()
	if plane.Name() != Default {
		t.Errorf("Name() = %s", plane.Name())
	}
	if err := plane.Probe(ctx); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if got := nftList(t, ns); got != "" {
		t.Errorf("Probe left tables:\n%s", got)
	}
	st, err := plane.Sync(ctx, &servicetable.Table{}, false)
	if err != nil || !st.Full || st.TotalOps() == 0 {
		t.Fatalf("first Sync = %+v, %v; want a full sync that creates the tables", st, err)
	}
	if got := nftList(t, ns); got != "table ip svcnet\ntable ip svcnet-nat-00\ntable ip6 svcnet\ntable ip6 svcnet-nat-00" {
		t.Errorf("after Sync:\n%s", got)
	}
	if moved, err := plane.Changed(ctx); err != nil || moved {
		t.Errorf("Changed after our own Sync = %v, %v", moved, err)
	}
	if out, err := ns.Command("nft", "add", "table", "ip", "other").CombinedOutput(); err != nil {
		t.Fatalf("nft add table: %v: %s", err, out)
	}
	if moved, err := plane.Changed(ctx); err != nil || !moved {
		t.Errorf("Changed after a foreign commit = %v, %v; want true", moved, err)
	}
	run(t, ns, func() error { return Cleanup(ctx, Options{}) })
	if got := nftList(t, ns); got != "table ip other" {
		t.Errorf("after Cleanup:\n%s\nwant only the foreign table", got)
	}
}

func TestIPVSRefused(t *testing.T) {
	err := Validate(IPVS)
	if err == nil {
		t.Fatal("Validate(ipvs) accepted it")
	}
	for _, want := range []string{"--data-plane ipvs: svcnet has no IPVS data plane", "deprecated its IPVS mode (KEP-5495, v1.35)",
		"--data-plane nftables", "eBPF data plane", "IP_VS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(ipvs) = %v, want %q in it", err, want)
		}
	}
	if _, _, oerr := Open(IPVS, Options{}); oerr == nil || oerr.Error() != err.Error() {
		t.Errorf("Open(ipvs) = %v, want %v", oerr, err)
	}
}

func TestIPVSKernel(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := ipvsKernel(root, "6.1.0"); got != "this kernel has no IP_VS (no /proc/net/ip_vs, no ip_vs module for 6.1.0)" {
		t.Errorf("bare root: %s", got)
	}
	write("lib/modules/6.1.0/modules.dep", "kernel/net/netfilter/nf_nat.ko:\n")
	if got := ipvsKernel(root, "6.1.0"); !strings.HasPrefix(got, "this kernel has no IP_VS") {
		t.Errorf("no ip_vs in modules.dep: %s", got)
	}
	write("lib/modules/6.1.0/modules.dep", "kernel/net/netfilter/ipvs/ip_vs.ko: kernel/net/netfilter/nf_conntrack.ko\n")
	if got := ipvsKernel(root, "6.1.0"); got != "this kernel has IP_VS as a module" {
		t.Errorf("module: %s", got)
	}
	write("proc/net/ip_vs", "IP Virtual Server version 1.2.1\n")
	if got := ipvsKernel(root, "6.1.0"); got != "this kernel has IP_VS loaded" {
		t.Errorf("loaded: %s", got)
	}
}

// TestOpenUserspace opens the userspace plane in a namespace, probes it,
// programs an empty service table (its redirect table in both families),
// and planes.Cleanup removes it.
func TestOpenUserspace(t *testing.T) {
	netnstest.RequireRoot(t)
	ns := netnstest.New(t, "planesus")
	ctx := context.Background()
	var plane dataplane.DataPlane
	var closeFn func() error
	run(t, ns, func() (err error) {
		plane, closeFn, err = Open("userspace", Options{})
		return err
	})
	defer func() {
		if err := closeFn(); err != nil {
			t.Error(err)
		}
	}()
	if plane.Name() != "userspace" {
		t.Errorf("Name() = %s", plane.Name())
	}
	if err := plane.Probe(ctx); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if st, err := plane.Sync(ctx, &servicetable.Table{}, false); err != nil || !st.Full || st.TotalOps() == 0 {
		t.Fatalf("first Sync = %+v, %v", st, err)
	}
	if got := nftList(t, ns); got != "table ip svcnet-userspace\ntable ip6 svcnet-userspace" {
		t.Errorf("after Sync:\n%s", got)
	}
	run(t, ns, func() error { return Cleanup(ctx, Options{}) })
	if got := nftList(t, ns); got != "" {
		t.Errorf("after Cleanup:\n%s", got)
	}
}
