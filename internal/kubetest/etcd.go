package kubetest

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// etcd is one single-member etcd on loopback.
type etcd struct {
	proc      *process
	clientURL string
}

// startEtcd starts etcd with its data under dir, on fresh loopback ports, and waits
// until /health answers. It retries (bounded) when a picked port was taken. On
// failure the returned etcd, when not nil, holds the failed process (for its log).
func startEtcd(bin, dir string, timeout time.Duration) (*etcd, error) {
	var (
		e   *etcd
		err error
	)
	for attempt := 0; attempt < 3; attempt++ {
		e, err = tryStartEtcd(bin, dir, attempt, timeout)
		if err == nil || e == nil || !portInUse(e.proc) {
			break
		}
	}
	return e, err
}

func tryStartEtcd(bin, dir string, attempt int, timeout time.Duration) (*etcd, error) {
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", cport)
	peer := fmt.Sprintf("http://127.0.0.1:%d", pport)
	data := filepath.Join(dir, fmt.Sprintf("etcd-data-%d", attempt))
	p, err := startProcess("etcd", filepath.Join(dir, "etcd.log"), bin,
		"--name=kubetest",
		"--data-dir="+data,
		"--listen-client-urls="+client,
		"--advertise-client-urls="+client,
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=kubetest="+peer,
		"--initial-cluster-state=new",
		"--logger=zap",
		"--log-level=warn",
	)
	if err != nil {
		return nil, err
	}
	e := &etcd{proc: p, clientURL: client}
	hc := &http.Client{Timeout: 2 * time.Second}
	err = waitReady(p, timeout, func(ctx context.Context) error {
		return checkEtcdHealth(ctx, hc, client)
	})
	if err != nil {
		_ = p.kill()
		return e, err
	}
	return e, nil
}

func checkEtcdHealth(ctx context.Context, hc *http.Client, url string) error {
	code, body, err := probe(ctx, hc, url+"/health", "")
	if err == nil && (code != http.StatusOK || !strings.Contains(body, `"health":"true"`)) {
		err = fmt.Errorf("etcd /health: %d %s", code, strings.TrimSpace(body))
	}
	return err
}

// waitReady polls check every 100ms until it succeeds, the process exits, or timeout
// passes. The error names the process and the last check error.
func waitReady(p *process, timeout time.Duration, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	lastErr := fmt.Errorf("not checked")
	for time.Now().Before(deadline) {
		if done, err := p.exited(); done {
			return fmt.Errorf("%s exited before it was ready: %w", p.name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		lastErr = check(ctx)
		cancel()
		if lastErr == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %v: %w", p.name, timeout, lastErr)
}
