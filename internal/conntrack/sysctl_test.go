package conntrack

import (
	"io/fs"
	"maps"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
)

func TestSysctlPlan(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  SysctlConfig
		cpus int
		want []Sysctl
	}{
		{"kube-proxy's defaults on 2 CPUs: min wins", DefaultSysctlConfig(), 2, []Sysctl{
			{"nf_conntrack_max", 131072, "maxPerCore 32768 × 2 CPUs is below min 131072"},
			{"nf_conntrack_tcp_timeout_established", 86400, "tcpEstablishedTimeout 24h0m0s"},
			{"nf_conntrack_tcp_timeout_close_wait", 3600, "tcpCloseWaitTimeout 1h0m0s"},
		}},
		{"kube-proxy's defaults on 8 CPUs: per core wins", DefaultSysctlConfig(), 8, []Sysctl{
			{"nf_conntrack_max", 262144, "maxPerCore 32768 × 8 CPUs"},
			{"nf_conntrack_tcp_timeout_established", 86400, "tcpEstablishedTimeout 24h0m0s"},
			{"nf_conntrack_tcp_timeout_close_wait", 3600, "tcpCloseWaitTimeout 1h0m0s"},
		}},
		{"capped", SysctlConfig{MaxPerCore: 32768, Min: 0}, 64, []Sysctl{
			{"nf_conntrack_max", 1048576, "maxPerCore 32768 × 64 CPUs, capped at 1048576"},
		}},
		{"maxPerCore 0 leaves the table size and ignores min", SysctlConfig{Min: 500000, UDPTimeout: 45 * time.Second,
			UDPStreamTimeout: 150500 * time.Millisecond, TCPBeLiberal: true}, 2, []Sysctl{
			{"nf_conntrack_tcp_be_liberal", 1, "tcpBeLiberal"},
			{"nf_conntrack_udp_timeout", 45, "udpTimeout 45s"},
			{"nf_conntrack_udp_timeout_stream", 150, "udpStreamTimeout 2m30.5s"},
		}},
		{"all zero: nothing", SysctlConfig{TCPEstablishedTimeout: 500 * time.Millisecond}, 2, nil},
	} {
		if d := cmp.Diff(tc.want, tc.cfg.Plan(tc.cpus)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}

// fakeFiles is IntFiles over a map; read-only paths refuse writes as
// /proc/sys does (EACCES, even for root).
type fakeFiles struct {
	vals     map[string]int
	readOnly map[string]bool
	writes   []string
}

func (f *fakeFiles) ReadInt(path string) (int, error) {
	v, ok := f.vals[path]
	if !ok {
		return 0, &fs.PathError{Op: "open", Path: path, Err: syscall.ENOENT}
	}
	return v, nil
}

func (f *fakeFiles) WriteInt(path string, v int) error {
	if _, ok := f.vals[path]; !ok {
		return &fs.PathError{Op: "open", Path: path, Err: syscall.ENOENT}
	}
	if f.readOnly[path] {
		return &fs.PathError{Op: "open", Path: path, Err: syscall.EACCES}
	}
	f.vals[path] = v
	f.writes = append(f.writes, path)
	return nil
}

func TestApplySysctls(t *testing.T) {
	nf := func(name string) string { return NetfilterSysctlDir + "/" + name }
	kernel := func() map[string]int {
		return map[string]int{
			nf("nf_conntrack_max"):                     262144,
			nf("nf_conntrack_tcp_timeout_established"): 432000,
			nf("nf_conntrack_tcp_timeout_close_wait"):  60,
			nf("nf_conntrack_udp_timeout"):             30,
			HashsizePath:                               65536,
		}
	}
	cfg := SysctlConfig{MaxPerCore: 200000, Min: 131072, TCPEstablishedTimeout: 24 * time.Hour,
		TCPCloseWaitTimeout: time.Hour, UDPTimeout: 30 * time.Second, UDPStreamTimeout: 2 * time.Minute}
	t.Run("writable: written where different, hash size raised", func(t *testing.T) {
		f := &fakeFiles{vals: kernel()}
		warnings := texts(ApplySysctls(f, cfg, 2, klog.Background()))
		want := kernel()
		want[nf("nf_conntrack_max")] = 400000
		want[HashsizePath] = 100000
		want[nf("nf_conntrack_tcp_timeout_established")] = 86400
		want[nf("nf_conntrack_tcp_timeout_close_wait")] = 3600
		if d := cmp.Diff(want, f.vals); d != "" {
			t.Errorf("values (-want +got):\n%s", d)
		}
		// udp_timeout was already 30: not rewritten.
		wantWrites := []string{nf("nf_conntrack_max"), HashsizePath, nf("nf_conntrack_tcp_timeout_established"), nf("nf_conntrack_tcp_timeout_close_wait")}
		if d := cmp.Diff(wantWrites, f.writes); d != "" {
			t.Errorf("writes (-want +got):\n%s", d)
		}
		wantWarn := []string{"conntrack: nf_conntrack_udp_timeout_stream not set to 120 (udpStreamTimeout 2m0s): " +
			"no such sysctl (open /proc/sys/net/netfilter/nf_conntrack_udp_timeout_stream: no such file or directory; is the nf_conntrack module loaded?)"}
		if d := cmp.Diff(wantWarn, warnings); d != "" {
			t.Errorf("warnings (-want +got):\n%s", d)
		}
	})
	t.Run("network namespace: nf_conntrack_max read-only, hash size untouched", func(t *testing.T) {
		f := &fakeFiles{vals: kernel(), readOnly: map[string]bool{nf("nf_conntrack_max"): true}}
		f.vals[nf("nf_conntrack_udp_timeout_stream")] = 120
		warnings := texts(ApplySysctls(f, cfg, 2, klog.Background()))
		wantWarn := []string{"conntrack: nf_conntrack_max not set to 400000 (maxPerCore 200000 × 2 CPUs): " +
			"read-only here (open /proc/sys/net/netfilter/nf_conntrack_max: permission denied; inside a network namespace nf_conntrack_max and the hash size are the host's); it stays 262144"}
		if d := cmp.Diff(wantWarn, warnings); d != "" {
			t.Errorf("warnings (-want +got):\n%s", d)
		}
		want := kernel()
		want[nf("nf_conntrack_udp_timeout_stream")] = 120
		want[nf("nf_conntrack_tcp_timeout_established")] = 86400
		want[nf("nf_conntrack_tcp_timeout_close_wait")] = 3600
		if d := cmp.Diff(want, f.vals); d != "" {
			t.Errorf("values (-want +got):\n%s", d)
		}
	})
	t.Run("hash size large enough: left", func(t *testing.T) {
		f := &fakeFiles{vals: kernel()}
		f.vals[HashsizePath] = 1 << 20
		before := maps.Clone(f.vals)
		ApplySysctls(f, SysctlConfig{MaxPerCore: 1, Min: 300000}, 2, klog.Background())
		before[nf("nf_conntrack_max")] = 300000
		if d := cmp.Diff(before, f.vals); d != "" {
			t.Errorf("values (-want +got):\n%s", d)
		}
	})
}

func TestCountCPUList(t *testing.T) {
	for in, want := range map[string]int{"0": 1, "0-1": 2, "0-3,6,8-9": 7, "": 0, "0-": 0, "3-1": 0, "x": 0} {
		got, ok := countCPUList(in)
		if got != want || ok != (want > 0) {
			t.Errorf("countCPUList(%q) = %d, %v, want %d", in, got, ok, want)
		}
	}
	if OnlineCPUs() < 1 {
		t.Errorf("OnlineCPUs() = %d", OnlineCPUs())
	}
	if _, err := os.Stat("/sys/devices/system/cpu/online"); err == nil {
		t.Logf("this machine: %d online CPUs", OnlineCPUs())
	}
}

// texts returns the warnings' texts.
func texts(ws []Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Text)
	}
	return out
}

func TestWarningMachineWide(t *testing.T) {
	f := &fakeFiles{vals: map[string]int{}, readOnly: map[string]bool{}}
	ws := ApplySysctls(f, SysctlConfig{MaxPerCore: 1, Min: 8, TCPCloseWaitTimeout: time.Hour}, 2, klog.Background())
	if len(ws) != 2 || !ws[0].MachineWide() || ws[1].MachineWide() || ws[1].Sysctl != "nf_conntrack_tcp_timeout_close_wait" {
		t.Errorf("warnings %+v: want nf_conntrack_max (machine-wide) then close_wait (the namespace's)", ws)
	}
}
