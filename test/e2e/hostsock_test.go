package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// standInHost is a network namespace that stands for the host's, for svcnet's
// CLI run as a process in it: lo, and eth0 to a sink namespace that is its
// default route (IPv4 and IPv6) and forwards nothing, so a packet the CLI
// sends to anything but loopback leaves by eth0 and goes nowhere. nftables
// in its output hook counts every packet sent from it except to loopback,
// and DNS even to loopback (a stub resolver on 127.0.0.53 would forward to
// the host's name servers), and records each destination; ICMPv6 is left
// out, as the kernel's own neighbour discovery on eth0 is no lab command's.
// The lab's namespaces are named under /run/netns and work from it as from
// the host's.
type standInHost struct {
	t  *testing.T
	ns *netns.NS
}

const hostsockTable = "svcnet_hostsock"

// hostsockRules count and record what leaves the stand-in host.
const hostsockRules = `table inet ` + hostsockTable + ` {
	set v4 { type ipv4_addr . inet_proto . inet_service; flags dynamic; size 4096; }
	set v6 { type ipv6_addr . inet_proto . inet_service; flags dynamic; size 4096; }
	counter sent { }
	chain output {
		type filter hook output priority 0; policy accept;
		meta l4proto ipv6-icmp accept
		oifname "lo" meta l4proto != { tcp, udp } accept
		oifname "lo" th dport != 53 accept
		counter name "sent"
		meta nfproto ipv4 meta l4proto { tcp, udp } add @v4 { ip daddr . meta l4proto . th dport }
		meta nfproto ipv6 meta l4proto { tcp, udp } add @v6 { ip6 daddr . meta l4proto . th dport }
	}
}
`

// The stand-in host and its sink: documentation prefixes (RFC 5737, RFC
// 3849), which no lab address uses.
const (
	hostAddr4, sinkAddr4 = "198.51.100.2/24", "198.51.100.1/24"
	hostAddr6, sinkAddr6 = "2001:db8:5::2/64", "2001:db8:5::1/64"
)

func newStandInHost(t *testing.T) *standInHost {
	t.Helper()
	host := netnstest.New(t, "host")
	sink := netnstest.New(t, "sink")
	err := host.Do(func() error {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(sink.Fd())}
		if err := netlink.LinkAdd(v); err != nil {
			return fmt.Errorf("add veth: %w", err)
		}
		return eth0Up(hostAddr4, hostAddr6)
	})
	if err == nil {
		err = sink.Do(func() error { return eth0Up(sinkAddr4, sinkAddr6) })
	}
	if err == nil {
		err = host.Do(func() error {
			eth0, err := netlink.LinkByName("eth0")
			if err != nil {
				return err
			}
			for _, gw := range []string{sinkAddr4, sinkAddr6} {
				a, _ := netlink.ParseAddr(gw)
				if err := netlink.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: a.IP}); err != nil {
					return fmt.Errorf("default route via %s: %w", a.IP, err)
				}
			}
			return nil
		})
	}
	if err != nil {
		t.Fatalf("stand-in host: %v", err)
	}
	cmd := netns.CommandIn(context.Background(), host.Name(), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(hostsockRules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("stand-in host: nft: %v: %s", err, out)
	}
	return &standInHost{t: t, ns: host}
}

// eth0Up gives eth0 its addresses (IPv6 without duplicate address detection,
// usable at once) and sets it up.
func eth0Up(cidrs ...string) error {
	l, err := netlink.LinkByName("eth0")
	if err != nil {
		return err
	}
	for _, c := range cidrs {
		a, err := netlink.ParseAddr(c)
		if err != nil {
			return err
		}
		if a.IP.To4() == nil {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := netlink.AddrAdd(l, a); err != nil {
			return fmt.Errorf("address %s: %w", c, err)
		}
	}
	return netlink.LinkSetUp(l)
}

// cliResult is how one svcnet command ended.
type cliResult struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return fmt.Sprintf("svcnet %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// svcnet runs svcnet ARGS in the stand-in host, bounded by timeout, with Go's
// own resolver (GODEBUG=netdns=go: a lookup through the host's resolver is
// then a packet to its name servers, never a call into libc's modules). It
// fails t when the command cannot run at all, or runs out of time.
func (h *standInHost) svcnet(t *testing.T, ctx context.Context, timeout time.Duration, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := netns.CommandNetIn(ctx, h.ns.Name(), append([]string{svcnetBin}, args...)...)
	cmd.Env = append(os.Environ(), "GODEBUG=netdns=go")
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliResult{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("svcnet %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		t.Errorf("svcnet %s: not done after %v", strings.Join(args, " "), timeout)
	}
	t.Logf("%s", r)
	return r
}

var packetsRE = regexp.MustCompile(`packets (\d+)`)

// checkNothingSent fails t when anything left the stand-in host, naming the
// destinations.
func (h *standInHost) checkNothingSent() {
	h.t.Helper()
	nft := func(args ...string) string {
		out, err := netns.CommandIn(context.Background(), h.ns.Name(), append([]string{"nft"}, args...)...).CombinedOutput()
		if err != nil {
			h.t.Fatalf("nft %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := nft("list", "counter", "inet", hostsockTable, "sent")
	m := packetsRE.FindStringSubmatch(out)
	if m == nil {
		h.t.Fatalf("no packet count in %q", out)
	}
	if n, _ := strconv.Atoi(m[1]); n > 0 {
		h.t.Errorf("%d packet(s) left the host's namespace for something other than loopback (or for DNS); destinations:\n%s%s",
			n, nft("list", "set", "inet", hostsockTable, "v4"), nft("list", "set", "inet", hostsockTable, "v6"))
	}
}
