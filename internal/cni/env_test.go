package cni_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/svcnet/svcnet/internal/cni"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// TestMain doubles as the plugin: run with CNI_COMMAND set, the test binary
// is the plugin as a runtime runs it (the multi-process tests use that).
func TestMain(m *testing.M) {
	if os.Getenv("CNI_COMMAND") != "" {
		cni.Main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Lab addresses (docs/design.md, IP plan): node1's pod CIDRs.
const (
	podCIDR4 = "192.168.1.0/24"
	podCIDR6 = "fd00:192:168:1::/64"
	gw4      = "192.168.1.1"
	gw6      = "fd00:192:168:1::1"
)

// lab is one test's node namespace with its IPAM store and the plugin.
type lab struct {
	t       *testing.T
	node    *netns.NS
	dataDir string
	conf    map[string]any
}

func newLab(t *testing.T, subnets ...string) *lab {
	t.Helper()
	node := netnstest.New(t, "cninode")
	dir := filepath.Join(t.TempDir(), "ipam")
	return &lab{t: t, node: node, dataDir: dir, conf: map[string]any{
		"cniVersion": "1.1.0", "name": "svcnet", "type": "svcnet", "bridge": "cni0",
		"subnets": subnets, "dataDir": dir,
	}}
}

// config returns the network configuration with extra fields set.
func (l *lab) config(extra map[string]any) []byte {
	m := map[string]any{}
	for k, v := range l.conf {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		l.t.Fatal(err)
	}
	return b
}

var podSeq atomic.Uint64

// pod is a pod namespace with its container ID.
type pod struct {
	ns *netns.NS
	id string
}

func (l *lab) newPod() *pod {
	l.t.Helper()
	ns := netnstest.New(l.t, "cnipod")
	return &pod{ns: ns, id: fmt.Sprintf("ctr%d-%d", os.Getpid(), podSeq.Add(1))}
}

// run runs one plugin command in the node's namespace, as a runtime would
// (the command on a thread in that namespace), and returns its stdout.
func (l *lab) run(cmd string, p *pod, ifname string, conf []byte) ([]byte, error) {
	args := &skel.CmdArgs{IfName: ifname, StdinData: conf}
	if p != nil {
		args.ContainerID, args.Netns = p.id, p.ns.Path()
	}
	return l.runRaw(cmd, args)
}

// runRaw runs one plugin command with args in the node's namespace.
func (l *lab) runRaw(cmd string, args *skel.CmdArgs) ([]byte, error) {
	var out bytes.Buffer
	pl := &cni.Plugin{Stdout: &out}
	fns := map[string]func(*skel.CmdArgs) error{"ADD": pl.Add, "DEL": pl.Del, "CHECK": pl.Check, "GC": pl.GC, "STATUS": pl.Status}
	err := l.node.Do(func() error { return fns[cmd](args) })
	return out.Bytes(), err
}

// add runs ADD and returns the parsed result.
func (l *lab) add(p *pod, extra map[string]any) *types100.Result {
	l.t.Helper()
	out, err := l.run("ADD", p, "eth0", l.config(extra))
	if err != nil {
		l.t.Fatalf("ADD %s: %v", p.id, err)
	}
	r, err := types100.NewResult(out)
	if err != nil {
		l.t.Fatalf("ADD %s: result %q: %v", p.id, out, err)
	}
	return r.(*types100.Result)
}

// withPrev returns extra plus the prevResult r, as runtimes pass it to CHECK and DEL.
func withPrev(extra map[string]any, r *types100.Result) map[string]any {
	m := map[string]any{}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(r)
	var prev map[string]any
	_ = json.Unmarshal(b, &prev)
	m["prevResult"] = prev
	return m
}

func (l *lab) check(p *pod, extra map[string]any, r *types100.Result) error {
	_, err := l.run("CHECK", p, "eth0", l.config(withPrev(extra, r)))
	return err
}

func (l *lab) del(p *pod, extra map[string]any) {
	l.t.Helper()
	if _, err := l.run("DEL", p, "eth0", l.config(extra)); err != nil {
		l.t.Fatalf("DEL %s: %v", p.id, err)
	}
}

// podIP returns the result's address of the family of want.
func podIP(t *testing.T, r *types100.Result, v6 bool) netip.Addr {
	t.Helper()
	for _, ip := range r.IPs {
		a, _ := netip.AddrFromSlice(ip.Address.IP)
		if a = a.Unmap(); a.Is6() == v6 {
			return a
		}
	}
	t.Fatalf("no IPv6=%v address in %v", v6, r.IPs)
	return netip.Addr{}
}

// allocations lists the IPAM store's address files.
func (l *lab) allocations() []string {
	l.t.Helper()
	ents, err := os.ReadDir(l.dataDir)
	if err != nil {
		l.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if _, err := netip.ParseAddr(e.Name()); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// sh runs argv in ns and returns its output, failing the test on error.
func sh(t *testing.T, ns *netns.NS, argv ...string) string {
	t.Helper()
	out, err := ns.Command(argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// cniCode returns the CNI error code of err (0 if it is not a CNI error).
func cniCode(err error) uint {
	var te *types.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}
