package cni_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha512"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/svcnet/svcnet/internal/cni"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// network is the conflist's name, as the lab calls it.
const network = "svcnet"

// Lab addresses (docs/design.md, IP plan): node1, its pod CIDRs, the external client.
const (
	node4    = "172.26.236.177"
	outside4 = "172.26.236.10"
	podCIDR4 = "192.168.1.0/24"
	podCIDR6 = "fd00:192:168:1::/64"
)

// env is one test's node namespace, network configuration and cnitool.
type env struct {
	t       *testing.T
	tool    string
	node    *netns.NS
	netDir  string // NETCONFPATH
	binDir  string // CNI_PATH
	varLib  string // cnitool's private /var/lib (libcni's cache)
	dataDir string // the plugin's IPAM store
}

func newEnv(t *testing.T, subnets ...string) *env {
	t.Helper()
	return newEnvVersion(t, "1.1.0", subnets...)
}

// newEnvVersion is newEnv with a conflist of CNI version version, as
// `svcnet cni install` writes it (cni.ConfList).
func newEnvVersion(t *testing.T, version string, subnets ...string) *env {
	t.Helper()
	tool := needTools(t)
	dir := t.TempDir()
	e := &env{t: t, tool: tool, node: netnstest.New(t, "cnitnode"),
		netDir: filepath.Join(dir, "net.d"), binDir: cniPath, varLib: filepath.Join(dir, "var-lib"), dataDir: filepath.Join(dir, "ipam")}
	for _, d := range []string{e.netDir, e.varLib} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var prefixes []netip.Prefix
	for _, s := range subnets {
		prefixes = append(prefixes, netip.MustParsePrefix(s))
	}
	b, err := cni.ConfList(cni.ListOptions{CNIVersion: version, Name: network, Bridge: "cni0", MTU: 1500, Subnets: prefixes, DataDir: e.dataDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.netDir, "10-svcnet.conflist"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// cnitool runs `cnitool cmd network NETNS` in the node's namespace, as a
// runtime would, with capArgs (JSON, may be empty) as CAP_ARGS. It runs in a
// private mount namespace whose /var/lib is the test's (see the package doc).
func (e *env) cnitool(cmd string, pod *netns.NS, capArgs string) (string, error) {
	return e.cnitoolNet(cmd, network, pod, capArgs)
}

// cnitoolNet is cnitool for the network netName (a conflist in netDir).
func (e *env) cnitoolNet(cmd, netName string, pod *netns.NS, capArgs string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	target := e.node
	if pod != nil {
		target = pod
	}
	c := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private",
		"sh", "-c", `mount --bind "$0" /var/lib && exec "$@"`, e.varLib,
		"ip", "netns", "exec", e.node.Name(), e.tool, cmd, netName, target.Path())
	c.Env = append(os.Environ(), "CNI_PATH="+e.binDir, "NETCONFPATH="+e.netDir, "CAP_ARGS="+capArgs)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		return stdout.String(), fmt.Errorf("cnitool %s: %w: %s%s", cmd, err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// add runs `cnitool add` and parses the result it prints.
func (e *env) add(pod *netns.NS, capArgs string) *types100.Result {
	e.t.Helper()
	out, err := e.cnitool("add", pod, capArgs)
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := types100.NewResult([]byte(out))
	if err != nil {
		e.t.Fatalf("cnitool add printed %q: %v", out, err)
	}
	return r.(*types100.Result)
}

// containerID is the container ID cnitool derives from a namespace's path.
func containerID(pod *netns.NS) string {
	s := sha512.Sum512([]byte(pod.Path()))
	return fmt.Sprintf("cnitool-%x", s[:10])
}

// cachedResult is libcni's cache file of pod's attachment.
func (e *env) cachedResult(pod *netns.NS) string {
	return filepath.Join(e.varLib, "cni", "results", network+"-"+containerID(pod)+"-eth0")
}

func (e *env) allocations() []string {
	e.t.Helper()
	ents, err := os.ReadDir(e.dataDir)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ent := range ents {
		if _, err := netip.ParseAddr(ent.Name()); err == nil {
			out = append(out, ent.Name())
		}
	}
	return out
}

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

func sh(t *testing.T, ns *netns.NS, argv ...string) string {
	t.Helper()
	out, err := ns.Command(argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// newOutside links an external client namespace to the node (ext0 both sides).
func (e *env) newOutside() *netns.NS {
	e.t.Helper()
	o := netnstest.New(e.t, "cnitout")
	sh(e.t, e.node, "ip", "link", "add", "ext0", "type", "veth", "peer", "name", "ext0", "netns", o.Name())
	sh(e.t, e.node, "ip", "addr", "add", node4+"/24", "dev", "ext0")
	sh(e.t, e.node, "ip", "link", "set", "ext0", "up")
	sh(e.t, o, "ip", "addr", "add", outside4+"/24", "dev", "ext0")
	sh(e.t, o, "ip", "link", "set", "ext0", "up")
	return o
}

// serveWho answers each TCP connection to port in ns with the client's
// address as the server sees it, until the test ends.
func serveWho(t *testing.T, ns *netns.NS, port int) {
	t.Helper()
	l, err := netns.Listen(ns, "tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(3 * time.Second))
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			_, _ = fmt.Fprintln(c, host)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
}

// askTCP connects from ns to addr and returns the line the server sends.
func askTCP(ns *netns.NS, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := netns.Dialer(ns)(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}
