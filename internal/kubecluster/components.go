package kubecluster

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
)

// Component names: also their log files' base names and their names in Dir/pids.
const (
	etcdName  = "etcd"
	apiName   = "kube-apiserver"
	kcmName   = "kube-controller-manager"
	schedName = "kube-scheduler"
)

// componentOrder is the start order (and reversed, the stop order).
var componentOrder = []string{etcdName, apiName, kcmName, schedName}

// component is one control-plane process: the command line it runs (the same on
// every restart), how its readiness is checked, and the running process.
type component struct {
	name  string
	argv  []string
	check func(ctx context.Context) error
	proc  *proc // nil until spawned
}

// logPath is the log file of the component name in dir.
func logPath(dir, name string) string { return filepath.Join(dir, name+".log") }

// etcdURL is etcd's client URL (on the loopback of the namespace it runs in).
func etcdURL(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }

// etcdArgv runs a single-member etcd on loopback with its data in dataDir.
func etcdArgv(bin, dataDir string, p Ports) []string {
	client := etcdURL(p.EtcdClient)
	peer := fmt.Sprintf("http://127.0.0.1:%d", p.EtcdPeer)
	return []string{bin,
		"--name=kubecluster",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=kubecluster=" + peer,
		"--initial-cluster-state=new",
		"--logger=zap",
		"--log-level=warn",
	}
}

// apiServerArgv runs kube-apiserver against etcd with the credentials and the
// serving certificate writeCredentials wrote into the dir.
func apiServerArgv(c *config, p Ports) []string {
	dir := c.Dir
	advertise, reconciler := "127.0.0.1", "none"
	if c.AdvertiseAddress != "" {
		advertise, reconciler = c.AdvertiseAddress, "lease"
	}
	saKey := filepath.Join(dir, saKeyFile)
	argv := []string{filepath.Join(c.BinDir, "kube-apiserver"),
		fmt.Sprintf("--secure-port=%d", p.APIServer),
		"--etcd-servers=" + etcdURL(p.EtcdClient),
		"--bind-address=" + c.BindAddress,
		// The Endpoints of default/kubernetes may not hold a loopback address, so with
		// the loopback default nothing reconciles them (the Service itself exists).
		"--advertise-address=" + advertise,
		"--endpoint-reconciler-type=" + reconciler,
		"--cert-dir=" + filepath.Join(dir, certDir),
		"--tls-cert-file=" + filepath.Join(dir, servingCertFile),
		"--tls-private-key-file=" + filepath.Join(dir, servingKeyFile),
		"--token-auth-file=" + filepath.Join(dir, tokensFile),
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + c.ServiceClusterIPRange,
		"--authorization-mode=RBAC",
		// Without it a graceful stop waits for open watches until the HTTP server's
		// shutdown timeout (60s); with it, watches are ended within this period.
		"--shutdown-watch-termination-grace-period=2s",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
	if !c.ServiceAccounts {
		// Usually no serviceaccount controller: without this, Pods could not be
		// created until a "default" ServiceAccount exists.
		argv = append(argv, "--disable-admission-plugins=ServiceAccount")
	}
	return append(argv, c.APIServerFlags...)
}

// kcmArgv runs kube-controller-manager with Controllers, talking to the apiserver
// through the kubeconfig Start writes for it, serving /healthz on loopback.
func kcmArgv(c *config, p Ports) []string {
	argv := []string{filepath.Join(c.BinDir, "kube-controller-manager"),
		"--kubeconfig=" + filepath.Join(c.Dir, kcmKubeconfigFile),
		"--leader-elect=false",
		"--controllers=" + strings.Join(c.Controllers, ","),
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", p.ControllerManager),
	}
	return append(argv, c.ControllerManagerFlags...)
}

// schedulerArgv runs kube-scheduler, talking to the apiserver through the
// kubeconfig Start writes for it, serving /healthz on loopback.
func schedulerArgv(c *config, p Ports) []string {
	argv := []string{filepath.Join(c.BinDir, "kube-scheduler"),
		"--kubeconfig=" + filepath.Join(c.Dir, schedKubeconfigFile),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", p.Scheduler),
	}
	return append(argv, c.SchedulerFlags...)
}

// checkFor returns the readiness check of the component name, reading the
// cluster's ports, URL, token and CA when called.
func (c *Cluster) checkFor(name string) func(ctx context.Context) error {
	switch name {
	case etcdName:
		hc := httpClient(c.o.dialer(), nil)
		return func(ctx context.Context) error {
			code, body, err := probe(ctx, hc, etcdURL(c.ports.EtcdClient)+"/health", "")
			if err == nil && (code != http.StatusOK || !strings.Contains(body, `"health":"true"`)) {
				err = fmt.Errorf("etcd /health: %d %s", code, strings.TrimSpace(body))
			}
			return err
		}
	case apiName:
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(c.ca)
		hc := httpClient(c.o.dialer(), pool)
		return func(ctx context.Context) error { return checkHealth(ctx, hc, c.URL+"/readyz", c.Token) }
	default:
		// /healthz is in the controller manager's and the scheduler's
		// always-allowed paths: no credentials, so their self-signed
		// certificates need not be verified.
		hc := httpClient(c.o.dialer(), nil)
		return func(ctx context.Context) error {
			port := c.ports.ControllerManager
			if name == schedName {
				port = c.ports.Scheduler
			}
			return checkHealth(ctx, hc, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), "")
		}
	}
}
