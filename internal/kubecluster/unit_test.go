package kubecluster

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFailedChecks(t *testing.T) {
	body := "[+]ping ok\n[-]etcd failed: reason withheld\n[+]log ok\n[-]poststarthook/x failed\nreadyz check failed\n"
	if got, want := failedChecks(body), "[-]etcd failed: reason withheld; [-]poststarthook/x failed"; got != want {
		t.Errorf("failedChecks = %q, want %q", got, want)
	}
	if got := failedChecks("forbidden\n"); got != "forbidden" {
		t.Errorf("failedChecks(short body) = %q", got)
	}
}

func TestPidsRoundTrip(t *testing.T) {
	es := []pidEntry{{"etcd", 10, 100}, {"kube-apiserver", 11, 101}}
	b := formatPids(es)
	if string(b) != "etcd 10 100\nkube-apiserver 11 101\n" {
		t.Fatalf("formatPids = %q", b)
	}
	got, err := parsePids(b)
	if err != nil || !slices.Equal(got, es) {
		t.Fatalf("parsePids = %v, %v; want %v", got, err, es)
	}
	for _, bad := range []string{"etcd 10\n", "etcd x 1\n", "etcd 0 1\n", "etcd 1 -1\n"} {
		if _, err := parsePids([]byte(bad)); err == nil {
			t.Errorf("parsePids(%q): want an error", bad)
		}
	}
}

func TestParseStat(t *testing.T) {
	// The command name may hold ") " and spaces; starttime is field 22.
	tail := " 1 1 1 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 1000 10"
	for _, tc := range []struct {
		line  string
		start uint64
		ok    bool
	}{
		{"42 (etcd) S" + tail, 123456, true},
		{"42 (a) b (c) R" + tail, 123456, true},
		{"42 (etcd) Z" + tail, 0, false},
		{"42 (etcd) S 1 2", 0, false},
		{"garbage", 0, false},
	} {
		start, ok := parseStat([]byte(tc.line))
		if start != tc.start || ok != tc.ok {
			t.Errorf("parseStat(%q) = %d, %v; want %d, %v", tc.line, start, ok, tc.start, tc.ok)
		}
	}
	if st, ok := procStart(os.Getpid()); !ok || st == 0 {
		t.Errorf("procStart(self) = %d, %v", st, ok)
	}
}

func TestServingNames(t *testing.T) {
	for _, tc := range []struct {
		name     string
		o        Options
		host     string
		ips, dns []string
	}{{
		name: "loopback default",
		o:    Options{BindAddress: "127.0.0.1", ServiceClusterIPRange: "10.96.0.0/12"},
		host: "127.0.0.1",
		ips:  []string{"::1", "10.96.0.1"},
		dns:  []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}, {
		name: "lab",
		o: Options{AdvertiseAddress: "172.26.236.176", BindAddress: "0.0.0.0",
			ServerURL: "https://172.26.236.176:6443", ServiceClusterIPRange: "10.96.0.0/12,fd00:96::/108"},
		host: "172.26.236.176",
		ips:  []string{"127.0.0.1", "::1", "10.96.0.1", "fd00:96::1"},
		dns:  []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}, {
		name: "bind address and DNS server name",
		o: Options{AdvertiseAddress: "172.26.236.176", BindAddress: "172.26.236.176",
			ServerURL: "https://api.lab:6443", ServiceClusterIPRange: "10.96.0.0/12"},
		host: "172.26.236.176",
		ips:  []string{"127.0.0.1", "::1", "10.96.0.1"},
		dns:  []string{"api.lab", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			host, ips, dns := servingNames(tc.o)
			var got []string
			for _, ip := range ips {
				got = append(got, ip.String())
			}
			if host != tc.host || !slices.Equal(got, tc.ips) || !slices.Equal(dns, tc.dns) {
				t.Errorf("servingNames = %s %v %v; want %s %v %v", host, got, dns, tc.host, tc.ips, tc.dns)
			}
		})
	}
}

func TestLocalURL(t *testing.T) {
	for bind, want := range map[string]string{
		"127.0.0.1":      "https://127.0.0.1:6443",
		"0.0.0.0":        "https://127.0.0.1:6443",
		"::":             "https://[::1]:6443",
		"172.26.236.176": "https://172.26.236.176:6443",
	} {
		if got := localURL(bind, 6443); got != want {
			t.Errorf("localURL(%s) = %s, want %s", bind, got, want)
		}
	}
}

// fakeBins makes executable stand-ins for the binaries (forStart only checks
// that they exist).
func fakeBins(t *testing.T) (etcd, binDir string) {
	dir := t.TempDir()
	for _, n := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "etcd"), dir
}

func TestForStart(t *testing.T) {
	etcd, bins := fakeBins(t)
	custom := func(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }
	base := Options{Dir: "rel", BinDir: bins, EtcdBin: etcd, ControllerManager: true, Scheduler: true}

	c, err := base.forStart()
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(c.Dir) || c.BindAddress != "127.0.0.1" || c.ServiceClusterIPRange != "10.96.0.0/12" ||
		!slices.Equal(c.Controllers, DefaultControllers) || c.ReadyTimeout != DefaultReadyTimeout {
		t.Errorf("defaults: %+v", c.Options)
	}
	if !c.pickEtcd || !c.pickAPI || !c.pickKCM || !c.pickSched {
		t.Errorf("zero ports must be picked: %+v", c)
	}

	o := base
	o.Command = custom
	if _, err := o.forStart(); err == nil || !strings.Contains(err.Error(), "every port must be set") {
		t.Errorf("custom Command with zero ports: err = %v", err)
	}
	o.Ports = DefaultPorts
	if c, err := o.forStart(); err != nil || c.pickEtcd || c.pickAPI || c.pickKCM || c.pickSched {
		t.Errorf("custom Command with DefaultPorts: %+v, %v", c, err)
	}

	for name, mutate := range map[string]func(*Options){
		"no dir":            func(o *Options) { o.Dir = "" },
		"no bin dir":        func(o *Options) { o.BinDir = "" },
		"missing binary":    func(o *Options) { o.BinDir = t.TempDir() },
		"bad bind":          func(o *Options) { o.BindAddress = "localhost" },
		"bad advertise":     func(o *Options) { o.AdvertiseAddress = "x" },
		"bad range":         func(o *Options) { o.ServiceClusterIPRange = "10.96.0.0" },
		"server URL scheme": func(o *Options) { o.ServerURL = "http://172.26.236.176:6443" },
	} {
		o := base
		mutate(&o)
		if _, err := o.forStart(); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// StopDir stops a recorded process whose command line names the dir, and leaves
// alone one that does not and one whose pid was recorded with another start time.
func TestStopDirMatchesCommandLine(t *testing.T) {
	dir := t.TempDir()
	start := func(arg0 string) (*exec.Cmd, <-chan struct{}) {
		cmd := exec.Command("sh", "-c", "sleep 30; exit 0", arg0) // not a lone command: sh must not exec sleep
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-done })
		return cmd, done
	}
	ours, oursDone := start(filepath.Join(dir, "etcd-data"))
	foreign, foreignDone := start("/elsewhere/x")
	reused, reusedDone := start(filepath.Join(dir, "kube-apiserver"))
	entry := func(name string, cmd *exec.Cmd, delta uint64) pidEntry {
		var st uint64
		for range 100 { // the child's /proc entry may lag its fork by a moment
			var ok bool
			if st, ok = procStart(cmd.Process.Pid); ok {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		return pidEntry{name: name, pid: cmd.Process.Pid, start: st + delta}
	}
	es := []pidEntry{entry("etcd", ours, 0), entry("kube-apiserver", reused, 1), entry("kube-controller-manager", foreign, 0)}
	if err := writePids(dir, es); err != nil {
		t.Fatal(err)
	}
	if err := StopDir(dir); err != nil {
		t.Fatal(err)
	}
	select {
	case <-oursDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the process under dir still runs after StopDir")
	}
	for name, done := range map[string]<-chan struct{}{"foreign": foreignDone, "reused pid": reusedDone} {
		select {
		case <-done:
			t.Errorf("StopDir stopped the %s process", name)
		default:
		}
	}
	if _, err := os.Stat(filepath.Join(dir, pidsFile)); !os.IsNotExist(err) {
		t.Errorf("pids file after StopDir: %v", err)
	}
	if err := StopDir(dir); err != nil {
		t.Errorf("second StopDir: %v", err)
	}
}

// waitReady gives up when the context ends, naming the last check error rather
// than the deadline.
func TestWaitReadyBounded(t *testing.T) {
	p := &proc{name: "x", done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	begin := time.Now()
	err := waitReady(ctx, p, time.Minute, func(context.Context) error { return &net.OpError{Op: "dial", Err: os.ErrDeadlineExceeded} })
	if err == nil || !strings.Contains(err.Error(), "x not ready") || !strings.Contains(err.Error(), "dial") {
		t.Errorf("err = %v", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("waitReady took %v", d)
	}
}
