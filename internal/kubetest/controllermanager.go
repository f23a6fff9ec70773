package kubetest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// DefaultControllers are the kube-controller-manager controllers started when
// Options.Controllers is empty: what Services need (EndpointSlices from Pods, and
// mirrored from custom Endpoints) and nothing else.
var DefaultControllers = []string{"endpointslice-controller", "endpointslice-mirroring-controller"}

// startControllerManager starts kube-controller-manager against the kubeconfig and
// waits until its /healthz answers. Its serving port is loopback; /healthz is in
// its always-allowed paths, so the probe needs no credentials.
func startControllerManager(bin, dir, kubeconfig string, opts Options, timeout time.Duration) (*process, error) {
	controllers := opts.Controllers
	if len(controllers) == 0 {
		controllers = DefaultControllers
	}
	var (
		lastErr error
		p       *process
	)
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		args := []string{
			"--kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--controllers=" + strings.Join(controllers, ","),
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", port),
		}
		args = append(args, opts.ControllerManagerFlags...)
		p, err = startProcess("kube-controller-manager", filepath.Join(dir, "controller-manager.log"), bin, args...)
		if err != nil {
			return nil, err
		}
		hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // self-signed, loopback probe
		}}
		url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
		lastErr = waitReady(p, timeout, func(ctx context.Context) error { return checkHealthz(ctx, hc, url) })
		hc.CloseIdleConnections()
		if lastErr == nil {
			return p, nil
		}
		_ = p.kill()
		if !portInUse(p) {
			return p, lastErr
		}
	}
	return p, lastErr
}

func checkHealthz(ctx context.Context, hc *http.Client, url string) error {
	code, body, err := probe(ctx, hc, url, "")
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("/healthz: %d: %s", code, failedChecks(body))
	}
	return err
}
