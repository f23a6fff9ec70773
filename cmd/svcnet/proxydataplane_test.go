package main

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/dataplane/planes"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
	"github.com/svcnet/svcnet/internal/proxy/healthcheck"
)

func TestProxyDataPlaneFlag(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string // "" for valid
	}{
		{nil, ""},
		{[]string{"--data-plane", "nftables"}, ""},
		{[]string{"--data-plane", "none", "--pod-routes"}, ""},
		{[]string{"--data-plane", "none", "--announce", "l2"}, ""},
		{[]string{"--data-plane", "none"}, "nothing to do without --pod-routes or --announce"},
		{[]string{"--data-plane", "iptables-legacy", "--pod-routes"}, `--data-plane "iptables-legacy": want nftables`},
		{[]string{"--data-plane", "ebpf", "--cgroup", "/kubepods", "--ebpf-scheduler", "lc"}, ""},
		{[]string{"--cgroup", "/kubepods"}, "--cgroup /kubepods: only --data-plane ebpf attaches to a cgroup (this is --data-plane nftables)"},
		{[]string{"--data-plane", "ebpf", "--cgroup", "kubepods"}, `--cgroup: cgroup path "kubepods": want an absolute, clean path`},
		{[]string{"--data-plane", "ebpf", "--cgroup", "/a/../b"}, `--cgroup: cgroup path "/a/../b"`},
		{[]string{"--data-plane", "ebpf", "--ebpf-scheduler", "wlc"}, `--ebpf-scheduler "wlc": want random, rr, sh, lc`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			o := &proxyOptions{}
			cmd := proxyCommand(o)
			if err := cmd.Flags().Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := o.validateDataPlane()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("validateDataPlane: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("validateDataPlane: err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	help := proxyCommand(&proxyOptions{}).Flags().Lookup("data-plane")
	if help == nil || help.DefValue != planes.Default || !strings.Contains(help.Usage, `"none"`) || !strings.Contains(help.Usage, "kube-proxy") {
		t.Errorf("--data-plane flag help = %+v; want default nftables and none documented", help)
	}
}

// With --data-plane none, /healthz turns healthy, with every family's status,
// once the source has synced (and not before).
func TestReportSynced(t *testing.T) {
	store := model.NewStore()
	health := healthcheck.NewProxyHealthServer(healthcheck.ProxyHealthConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- reportSynced(ctx, store, health, []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}) }()
	time.Sleep(50 * time.Millisecond)
	if st := health.Health().Status; len(st) != 0 {
		t.Fatalf("status before the source synced = %v, want none", st)
	}
	store.Update(func(tx *model.Txn) { tx.SetSynced(true) })
	if err := <-done; err != nil {
		t.Fatalf("reportSynced: %v", err)
	}
	h := health.Health()
	if !h.Healthy || !h.Status[v1.IPv4Protocol].Healthy || !h.Status[v1.IPv6Protocol].Healthy {
		t.Fatalf("health after sync = %+v, want both families healthy", h)
	}

	// A context that ends first is an error.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := reportSynced(ctx2, model.NewStore(), health, nil); err == nil {
		t.Fatal("reportSynced with an ended context: no error")
	}
}
