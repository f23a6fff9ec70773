package iptables

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	ipt "github.com/svcnet/svcnet/internal/iptables"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// rejectRounds is how many connects each iteration of
// BenchmarkKernelUnknownPortReject makes through every router.
const rejectRounds = 5000

// rejectPath is one router of BenchmarkKernelUnknownPortReject: the reject
// of n ClusterIPs in one plane's form, and the connect times through it.
type rejectPath struct {
	plane string // "ipt" or "nft"
	n     int
	// toClusterIP is the client's next hop for ClusterIPs when it probes
	// this router; dst is the server's address behind it.
	toClusterIP string
	dst         unix.SockaddrInet4
	times       []time.Duration
}

func (p *rejectPath) name() string { return fmt.Sprintf("%s%d", p.plane, p.n) }

// BenchmarkKernelUnknownPortReject measures what rejecting new connections to
// the unknown ports of N ClusterIPs costs a forwarded connection to none of
// them (one to a pod IP, or a DNATed one), in both planes' forms. A client
// and a server namespace are joined by six router namespaces, each on
// subnets of its own; in its filter table each holds
//
//   - ipt: FORWARD -m conntrack --ctstate NEW -j KUBE-SERVICES (the plane's
//     jump) and in KUBE-SERVICES one REJECT rule per ClusterIP, restored with
//     iptables-nft-restore, N = 0, 1000, 10000;
//   - nft: a forward chain whose new connections jump to a chain with the
//     nftables plane's one lookup in a cluster-ips set of N addresses,
//     N = 0, 1000, 10000.
//
// Before timing, a connect to the last ClusterIP through each router with
// N > 0 must be refused. Each iteration then times rejectRounds sequential
// TCP connects through each router in turn (A B C … A B C, so drift meets all
// alike), every one reset on close (no TIME_WAIT). Metrics per router: p50
// and p99 connect time in µs and sequential connects per second; per N > 0,
// the p50 and p99 excess over the same plane's N = 0, in µs (what one node
// adds to each new connection it forwards or sends).
//
//	SVCNET_REQUIRE_ROOT=1 go test -run '^$' -bench KernelUnknownPortReject -benchtime 1x ./internal/dataplane/iptables
func BenchmarkKernelUnknownPortReject(b *testing.B) {
	cli := netnstest.New(b, "iptrej-cli")
	srv := netnstest.New(b, "iptrej-srv")
	rejectSh(b, cli, "ip link set lo up")
	rejectSh(b, srv, "ip link set lo up")
	var paths []*rejectPath
	for _, plane := range []string{"ipt", "nft"} {
		for _, n := range []int{0, 1000, 10000} {
			paths = append(paths, &rejectPath{plane: plane, n: n})
		}
	}
	for i, p := range paths {
		rtr := netnstest.New(b, fmt.Sprintf("iptrej-%s", p.name()))
		in, out := fmt.Sprintf("10.250.%d", i), fmt.Sprintf("10.251.%d", i)
		rejectSh(b, rtr,
			"sysctl -qw net.ipv4.ip_forward=1",
			"ip link set lo up",
			fmt.Sprintf("ip link add in type veth peer name c%d netns %s", i, cli.Name()),
			fmt.Sprintf("ip link add out type veth peer name s%d netns %s", i, srv.Name()),
			"ip addr add "+in+".2/24 dev in",
			"ip addr add "+out+".2/24 dev out",
			"ip link set in up",
			"ip link set out up",
			// ClusterIPs are routed on to the server, as a node routes
			// them by default, so only the reject stops them.
			"ip route add 10.96.0.0/12 via "+out+".1")
		rejectSh(b, cli,
			fmt.Sprintf("ip addr add %s.1/24 dev c%d", in, i),
			fmt.Sprintf("ip link set c%d up", i),
			fmt.Sprintf("ip route add %s.0/24 via %s.2", out, in))
		rejectSh(b, srv,
			fmt.Sprintf("ip addr add %s.1/24 dev s%d", out, i),
			fmt.Sprintf("ip link set s%d up", i),
			fmt.Sprintf("ip route add %s.0/24 via %s.2", in, out))
		p.toClusterIP = in + ".2"
		p.dst = unix.SockaddrInet4{Port: 8080, Addr: netip.MustParseAddr(out + ".1").As4()}
		switch p.plane {
		case "ipt":
			programIptReject(b, rtr, p.n)
		case "nft":
			programNftReject(b, rtr, p.n)
		}
	}
	netnstest.ClosingServer(b, srv, "tcp4", "0.0.0.0:8080")
	for _, p := range paths {
		if p.n == 0 {
			continue
		}
		last := clusterIP(p.n - 1)
		rejectSh(b, cli, "ip route replace 10.96.0.0/12 via "+p.toClusterIP)
		err := cli.Do(func() error {
			_, err := connectOnce(unix.SockaddrInet4{Port: 80, Addr: last.As4()})
			return err
		})
		if !errors.Is(err, unix.ECONNREFUSED) {
			b.Fatalf("%s: connect to %s:80: got %v, want refused", p.name(), last, err)
		}
	}
	rejectSh(b, cli, "ip route del 10.96.0.0/12")
	warm := func() error { // each path once, and the listener is up
		for _, p := range paths {
			if _, err := connectOnce(p.dst); err != nil {
				return fmt.Errorf("%s: connect: %w", p.name(), err)
			}
		}
		return nil
	}
	if err := cli.Do(warm); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		// One locked thread in the client namespace makes every connect.
		err := cli.Do(func() error {
			for range rejectRounds {
				for _, p := range paths {
					d, err := connectOnce(p.dst)
					if err != nil {
						return fmt.Errorf("%s: connect: %w", p.name(), err)
					}
					p.times = append(p.times, d)
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	base := map[string]*rejectPath{}
	for _, p := range paths {
		if p.n == 0 {
			base[p.plane] = p
		}
	}
	for _, p := range paths {
		var sum time.Duration
		for _, d := range p.times {
			sum += d
		}
		p50, p99 := nearestRank(p.times, 50), nearestRank(p.times, 99)
		b.ReportMetric(us(p50), p.name()+"-p50-us")
		b.ReportMetric(us(p99), p.name()+"-p99-us")
		b.ReportMetric(float64(len(p.times))/sum.Seconds(), p.name()+"-conn/s")
		line := fmt.Sprintf("%-9s p50 %7.1f µs  p99 %7.1f µs", p.name(), us(p50), us(p99))
		if p.n > 0 {
			z := base[p.plane]
			over50 := us(p50) - us(nearestRank(z.times, 50))
			over99 := us(p99) - us(nearestRank(z.times, 99))
			b.ReportMetric(over50, p.name()+"-over0-p50-us")
			b.ReportMetric(over99, p.name()+"-over0-p99-us")
			line += fmt.Sprintf("  over N=0: p50 %+7.1f µs  p99 %+7.1f µs", over50, over99)
		}
		b.Log(line)
	}
}

// clusterIP is the i-th ClusterIP the routers reject: 10.96.0.1 on, never
// a server address.
func clusterIP(i int) netip.Addr {
	i++
	return netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)})
}

// programIptReject restores, in rtr, the plane's jump from FORWARD to
// KUBE-SERVICES and a REJECT per ClusterIP in it, as iptables-save prints
// them, and checks that the kernel holds n rules there.
func programIptReject(b *testing.B, rtr *netns.NS, n int) {
	b.Helper()
	var sb strings.Builder
	sb.WriteString("*filter\n:" + ChainServices + " - [0:0]\n")
	for _, j := range Jumps {
		if j.Table == TableFilter && j.From == "FORWARD" && j.To == ChainServices {
			fmt.Fprintf(&sb, "-A FORWARD %s\n", j.Rule)
		}
	}
	for i := range n {
		fmt.Fprintf(&sb, "-A %s -d %s/32 -m comment --comment \"bench/svc-%d has no such port\" -j REJECT --reject-with icmp-port-unreachable\n",
			ChainServices, clusterIP(i), i)
	}
	sb.WriteString("COMMIT\n")
	k := kernel(rtr)
	if err := k.Restore(context.Background(), ipfamily.IPv4, []byte(sb.String())); err != nil {
		b.Fatal(err)
	}
	out, err := k.Save(context.Background(), ipfamily.IPv4, TableFilter)
	if err != nil {
		b.Fatal(err)
	}
	tables, err := ipt.ParseSave(out)
	if err != nil {
		b.Fatal(err)
	}
	filter := tables[TableFilter]
	if filter == nil || filter.Chains[ChainServices] == nil || filter.Chains["FORWARD"] == nil {
		b.Fatalf("iptables-save -t filter lacks FORWARD or %s:\n%s", ChainServices, out)
	}
	if got := len(filter.Chains[ChainServices].Rules); got != n {
		b.Fatalf("%s holds %d rules, want %d", ChainServices, got, n)
	}
	if got := len(filter.Chains["FORWARD"].Rules); got != 1 {
		b.Fatalf("FORWARD holds %d rules, want the jump alone", got)
	}
}

// programNftReject loads, in rtr, the nftables plane's form of the same
// reject: new forwarded connections jump to a chain that looks the
// destination up in a cluster-ips set of n addresses.
func programNftReject(b *testing.B, rtr *netns.NS, n int) {
	b.Helper()
	var sb strings.Builder
	sb.WriteString("table ip svcnet-bench {\n\tset cluster-ips {\n\t\ttype ipv4_addr\n\t\tcomment \"Active ClusterIPs\"\n")
	if n > 0 {
		sb.WriteString("\t\telements = { ")
		for i := range n {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(clusterIP(i).String())
		}
		sb.WriteString(" }\n")
	}
	sb.WriteString("\t}\n" +
		"\tchain filter-forward {\n\t\ttype filter hook forward priority -110; policy accept;\n" +
		"\t\tct state new jump cluster-ips-check\n\t}\n" +
		"\tchain cluster-ips-check {\n" +
		"\t\tip daddr @cluster-ips reject comment \"reject traffic to invalid ports of ClusterIPs\"\n\t}\n}\n")
	cmd := rtr.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(sb.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("nft -f: %v\n%s", err, out)
	}
}

// connectOnce times one blocking TCP connect to dst from the calling
// thread's namespace (at most 2 s) and closes the socket with a reset.
func connectOnce(dst unix.SockaddrInet4) (time.Duration, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
		return 0, err
	}
	tv := unix.Timeval{Sec: 2}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return 0, err
	}
	start := time.Now()
	err = unix.Connect(fd, &dst)
	return time.Since(start), err
}

// rejectSh runs commands (one per line, split at spaces) in ns.
func rejectSh(b *testing.B, ns *netns.NS, lines ...string) {
	b.Helper()
	for _, l := range lines {
		if out, err := ns.Command(strings.Fields(l)...).CombinedOutput(); err != nil {
			b.Fatalf("%s: %v: %s", l, err, out)
		}
	}
}

// nearestRank returns the q-th percentile (nearest rank) of ds.
func nearestRank(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*q + 99) / 100
	return s[max(i-1, 0)]
}
