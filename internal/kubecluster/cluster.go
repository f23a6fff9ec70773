package kubecluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Cluster is a running control plane, started by Start or found by Attach. Its
// methods are safe for concurrent use.
type Cluster struct {
	// Kubeconfig is Dir/kubeconfig: the admin user's token, the CA and ServerURL,
	// for other clients (commands under test, a lab's nodes).
	Kubeconfig string
	// Config and Client talk to the apiserver as the admin user (system:masters)
	// at URL, through Options.Dial when it was given.
	Config *rest.Config
	Client kubernetes.Interface
	// URL is the apiserver's URL as the caller reaches it (through Options.Dial):
	// https://BIND:PORT, or loopback when the bind address is unspecified.
	// ServerURL is the one in Kubeconfig. Token is the admin bearer token.
	URL, ServerURL, Token string

	o     Options // Dir, Command, Detach, Dial, ReadyTimeout
	ports Ports
	ca    []byte // PEM of the apiserver's CA

	mu    sync.Mutex
	comps []*component // in start order
}

// Dir returns the cluster's directory (absolute).
func (c *Cluster) Dir() string { return c.o.Dir }

// Start starts etcd, kube-apiserver and (if asked) kube-controller-manager, each
// waited for until ready (bounded by Options.ReadyTimeout and ctx), and writes the
// credentials, certificates, kubeconfigs and Dir/cluster.json. It refuses a Dir
// whose pids file names running components. On any error it kills what it started
// and returns the error; a component that failed gives a *StartError with the
// tail of its log.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	cfg, err := o.forStart()
	if err != nil {
		return nil, fmt.Errorf("kubecluster: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("kubecluster: %w", err)
	}
	live, err := runningEntries(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("kubecluster %s: %w", cfg.Dir, err)
	}
	if len(live) > 0 {
		return nil, fmt.Errorf("kubecluster %s: already running (%s, pid %d): Attach to it or StopDir it first", cfg.Dir, live[0].name, live[0].pid)
	}
	c := &Cluster{o: cfg.Options, ports: cfg.Ports}
	if err := c.start(ctx, cfg); err != nil {
		_ = c.Kill()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, cfg *config) error {
	cr, err := writeCredentials(cfg)
	if err != nil {
		return fmt.Errorf("kubecluster %s: %w", cfg.Dir, err)
	}
	c.ca, c.Token = cr.ca, cr.token

	attempt := 0
	_, err = c.launch(ctx, cfg.pickEtcd, 3, 0, func() (*component, error) {
		attempt++
		if cfg.pickEtcd {
			if err := pickPorts(&c.ports.EtcdClient, &c.ports.EtcdPeer); err != nil {
				return nil, err
			}
		}
		data := filepath.Join(cfg.Dir, "etcd-data")
		if attempt > 1 { // a failed first start may have left a half-made member
			data = fmt.Sprintf("%s-%d", data, attempt)
		}
		return &component{name: etcdName, argv: etcdArgv(cfg.EtcdBin, data, c.ports)}, nil
	})
	if err != nil {
		return err
	}

	_, err = c.launch(ctx, cfg.pickAPI, 3, 0, func() (*component, error) {
		if cfg.pickAPI {
			if err := pickPorts(&c.ports.APIServer); err != nil {
				return nil, err
			}
		}
		c.URL = localURL(cfg.BindAddress, c.ports.APIServer)
		return &component{name: apiName, argv: apiServerArgv(cfg, c.ports)}, nil
	})
	if err != nil {
		return err
	}
	c.ServerURL = cfg.ServerURL
	if c.ServerURL == "" {
		c.ServerURL = c.URL
	}
	c.Kubeconfig = filepath.Join(cfg.Dir, kubeconfigFile)
	if err := writeKubeconfig(c.Kubeconfig, c.ServerURL, cr); err != nil {
		return fmt.Errorf("kubecluster: %w", err)
	}
	if err := c.connect(); err != nil {
		return err
	}

	if cfg.ControllerManager {
		if err := writeKubeconfig(filepath.Join(cfg.Dir, kcmKubeconfigFile), c.URL, cr); err != nil {
			return fmt.Errorf("kubecluster: %w", err)
		}
		_, err = c.launch(ctx, cfg.pickKCM, 3, 0, func() (*component, error) {
			if cfg.pickKCM {
				if err := pickPorts(&c.ports.ControllerManager); err != nil {
					return nil, err
				}
			}
			return &component{name: kcmName, argv: kcmArgv(cfg, c.ports)}, nil
		})
		if err != nil {
			return err
		}
	}
	if cfg.Scheduler {
		if err := writeKubeconfig(filepath.Join(cfg.Dir, schedKubeconfigFile), c.URL, cr); err != nil {
			return fmt.Errorf("kubecluster: %w", err)
		}
		_, err = c.launch(ctx, cfg.pickSched, 3, 0, func() (*component, error) {
			if cfg.pickSched {
				if err := pickPorts(&c.ports.Scheduler); err != nil {
					return nil, err
				}
			}
			return &component{name: schedName, argv: schedulerArgv(cfg, c.ports)}, nil
		})
		if err != nil {
			return err
		}
	}
	return c.writeState()
}

// pickPorts sets each port to a free one.
func pickPorts(ports ...*int) error {
	for _, p := range ports {
		var err error
		if *p, err = freePort(); err != nil {
			return err
		}
	}
	return nil
}

// launch starts the component build returns and waits until it is ready. With
// retry, a start that failed because a port was taken is tried again, up to
// attempts in all, pause apart, with a new build (which may pick new ports). The
// error is a *StartError.
func (c *Cluster) launch(ctx context.Context, retry bool, attempts int, pause time.Duration, build func() (*component, error)) (*component, error) {
	for n := 1; ; n++ {
		comp, err := build()
		if err != nil {
			return nil, &StartError{Component: "cluster", Err: err}
		}
		comp.check = c.checkFor(comp.name)
		err = c.run(ctx, comp)
		if err == nil {
			return comp, nil
		}
		serr := &StartError{Component: comp.name, Err: err}
		if comp.proc != nil {
			serr.Log = lastLines(comp.proc.logSinceStart(), startErrorLines)
		}
		if !retry || n >= attempts || comp.proc == nil || !comp.proc.portTaken() || ctx.Err() != nil {
			return comp, serr
		}
		select {
		case <-ctx.Done():
			return comp, serr
		case <-time.After(pause):
		}
	}
}

// run spawns comp, records its pid and waits until it is ready; a component that
// does not become ready is killed.
func (c *Cluster) run(ctx context.Context, comp *component) error {
	p, err := spawn(&c.o, comp.name, logPath(c.o.Dir, comp.name), comp.argv)
	if err != nil {
		return err
	}
	c.mu.Lock()
	comp.proc = p
	c.put(comp)
	err = c.writePidsLocked()
	c.mu.Unlock()
	if err != nil {
		_ = p.kill()
		return err
	}
	if err := waitReady(ctx, p, c.o.ReadyTimeout, comp.check); err != nil {
		_ = p.kill()
		return err
	}
	return nil
}

// put adds comp, or replaces the component of its name. c.mu must be held.
func (c *Cluster) put(comp *component) {
	for i, o := range c.comps {
		if o.name == comp.name {
			c.comps[i] = comp
			return
		}
	}
	c.comps = append(c.comps, comp)
}

// get returns the component name, or nil. c.mu must be held.
func (c *Cluster) get(name string) *component {
	for _, o := range c.comps {
		if o.name == name {
			return o
		}
	}
	return nil
}

// writePidsLocked records the components that run in Dir/pids. c.mu must be held.
func (c *Cluster) writePidsLocked() error {
	var es []pidEntry
	for _, comp := range c.comps {
		if comp.proc == nil {
			continue
		}
		if done, _ := comp.proc.exited(); !done {
			es = append(es, pidEntry{name: comp.name, pid: comp.proc.pid, start: comp.proc.start})
		}
	}
	if err := writePids(c.o.Dir, es); err != nil {
		return fmt.Errorf("kubecluster %s: %w", c.o.Dir, err)
	}
	return nil
}

// connect builds Config and Client for URL, Token and the CA.
func (c *Cluster) connect() error {
	c.Config = &rest.Config{
		Host:            c.URL,
		BearerToken:     c.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.ca},
		QPS:             200,
		Burst:           400,
		UserAgent:       "kubecluster",
	}
	if c.o.Dial != nil {
		c.Config.Dial = c.o.Dial
	}
	var err error
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return fmt.Errorf("kubecluster: client: %w", err)
	}
	return nil
}
