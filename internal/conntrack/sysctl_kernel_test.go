//go:build linux

package conntrack_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/conntrack"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// readNetfilter reads the named sysctls under /proc/sys/net/netfilter in the
// calling thread's network namespace.
func readNetfilter(t *testing.T, names ...string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, n := range names {
		v, err := conntrack.ProcFiles{}.ReadInt(conntrack.NetfilterSysctlDir + "/" + n)
		if err != nil {
			t.Fatalf("read %s: %v", n, err)
		}
		out[n] = v
	}
	return out
}

// TestApplySysctlsInNetns applies conntrack sysctls inside a throwaway
// network namespace on the real kernel: the per-namespace timeouts and
// be_liberal are written there and read back there; nf_conntrack_max, the
// host's and read-only inside a namespace, costs exactly one warning and is
// left, as is the machine-wide hash size; the host namespace's own values
// do not move.
func TestApplySysctlsInNetns(t *testing.T) {
	ns := netnstest.New(t, "ctsysctl")
	perNS := []string{"nf_conntrack_tcp_timeout_established", "nf_conntrack_tcp_timeout_close_wait",
		"nf_conntrack_tcp_be_liberal", "nf_conntrack_udp_timeout", "nf_conntrack_udp_timeout_stream"}
	host := readNetfilter(t, append(perNS, "nf_conntrack_max")...)
	hashsize, err := conntrack.ProcFiles{}.ReadInt(conntrack.HashsizePath)
	if err != nil {
		t.Fatal(err)
	}
	// Values unlike the host's (and the kernel's defaults), so that each
	// one must be written; MaxPerCore 1 makes nf_conntrack_max = Min.
	cfg := conntrack.SysctlConfig{
		MaxPerCore: 1, Min: host["nf_conntrack_max"] + 4096,
		TCPEstablishedTimeout: time.Duration(host["nf_conntrack_tcp_timeout_established"]+1111) * time.Second,
		TCPCloseWaitTimeout:   time.Duration(host["nf_conntrack_tcp_timeout_close_wait"]+2222) * time.Second,
		TCPBeLiberal:          host["nf_conntrack_tcp_be_liberal"] == 0,
		UDPTimeout:            time.Duration(host["nf_conntrack_udp_timeout"]+33) * time.Second,
		UDPStreamTimeout:      time.Duration(host["nf_conntrack_udp_timeout_stream"]+44) * time.Second,
	}
	var warnings []conntrack.Warning
	var inside map[string]int
	if err := ns.Do(func() error {
		warnings = conntrack.ApplySysctls(conntrack.ProcFiles{}, cfg, 2, klog.Background())
		inside = readNetfilter(t, append(perNS, "nf_conntrack_max")...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	want := map[string]int{
		"nf_conntrack_tcp_timeout_established": int(cfg.TCPEstablishedTimeout / time.Second),
		"nf_conntrack_tcp_timeout_close_wait":  int(cfg.TCPCloseWaitTimeout / time.Second),
		"nf_conntrack_tcp_be_liberal":          host["nf_conntrack_tcp_be_liberal"],
		"nf_conntrack_udp_timeout":             int(cfg.UDPTimeout / time.Second),
		"nf_conntrack_udp_timeout_stream":      int(cfg.UDPStreamTimeout / time.Second),
		"nf_conntrack_max":                     host["nf_conntrack_max"],
	}
	if cfg.TCPBeLiberal {
		want["nf_conntrack_tcp_be_liberal"] = 1
	}
	for k, v := range want {
		if inside[k] != v {
			t.Errorf("inside the namespace %s = %d, want %d", k, inside[k], v)
		}
	}
	wantWarn := fmt.Sprintf("conntrack: nf_conntrack_max not set to %d (maxPerCore 1 × 2 CPUs is below min %d): read-only here", cfg.Min, cfg.Min)
	if len(warnings) != 1 || !warnings[0].MachineWide() || !strings.HasPrefix(warnings[0].Text, wantWarn) || !strings.HasSuffix(warnings[0].Text, fmt.Sprintf("it stays %d", host["nf_conntrack_max"])) {
		t.Errorf("warnings %q, want one starting %q", warnings, wantWarn)
	}
	if after := readNetfilter(t, append(perNS, "nf_conntrack_max")...); fmt.Sprint(after) != fmt.Sprint(host) {
		t.Errorf("host namespace's sysctls moved: %v, were %v", after, host)
	}
	if after, err := (conntrack.ProcFiles{}).ReadInt(conntrack.HashsizePath); err != nil || after != hashsize {
		t.Errorf("hash size %d (%v), was %d", after, err, hashsize)
	}
}
