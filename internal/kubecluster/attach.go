package kubecluster

import (
	"github.com/svcnet/svcnet/internal/atomicfile"

	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// stateFile is what Attach needs that the credentials do not say: URLs, ports
// and each component's command line (for a restart).
const stateFile = "cluster.json"

type state struct {
	URL        string           `json:"url"`
	ServerURL  string           `json:"serverURL"`
	Ports      Ports            `json:"ports"`
	Components []stateComponent `json:"components"`
}

type stateComponent struct {
	Name string   `json:"name"`
	Argv []string `json:"argv"`
}

func (c *Cluster) writeState() error {
	c.mu.Lock()
	st := state{URL: c.URL, ServerURL: c.ServerURL, Ports: c.ports}
	for _, comp := range c.comps {
		st.Components = append(st.Components, stateComponent{Name: comp.name, Argv: comp.argv})
	}
	c.mu.Unlock()
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("kubecluster: state: %w", err)
	}
	return atomicfile.Write(filepath.Join(c.o.Dir, stateFile), append(b, '\n'), 0o644)
}

func readState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("state %s: %w", filepath.Join(dir, stateFile), err)
	}
	if st.URL == "" || len(st.Components) == 0 {
		return nil, fmt.Errorf("state %s: incomplete", filepath.Join(dir, stateFile))
	}
	return &st, nil
}

// Attach connects to a cluster that an earlier Start (typically Detached, by
// another process) left running in o.Dir: it reads the token, the CA, the URLs
// and Dir/pids, requires every component Start recorded to be running still, and
// waits (bounded by o.ReadyTimeout and ctx) until the apiserver is ready. Only
// o.Dir, o.Dial, o.Command, o.Detach and o.ReadyTimeout are used; the last three
// for StartAPIServer. The Cluster's Stop and Kill stop the processes by pid.
func Attach(ctx context.Context, o Options) (*Cluster, error) {
	o, err := o.withRunDefaults()
	if err != nil {
		return nil, fmt.Errorf("kubecluster: attach: %w", err)
	}
	st, err := readState(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("kubecluster: attach %s: %w", o.Dir, err)
	}
	cr, err := readCredentials(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("kubecluster: attach %s: %w", o.Dir, err)
	}
	es, err := readPids(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("kubecluster: attach %s: %w", o.Dir, err)
	}
	c := &Cluster{
		Kubeconfig: filepath.Join(o.Dir, kubeconfigFile),
		URL:        st.URL, ServerURL: st.ServerURL, Token: cr.token,
		o: o, ports: st.Ports, ca: cr.ca,
	}
	for _, sc := range st.Components {
		var p *proc
		for _, e := range es {
			if e.name == sc.Name {
				p = adopt(e, o.Dir)
			}
		}
		if p == nil {
			return nil, fmt.Errorf("kubecluster: attach %s: %s is not running", o.Dir, sc.Name)
		}
		c.comps = append(c.comps, &component{name: sc.Name, argv: sc.Argv, check: c.checkFor(sc.Name), proc: p})
	}
	api := c.get(apiName)
	if api == nil {
		return nil, fmt.Errorf("kubecluster: attach %s: no %s recorded", o.Dir, apiName)
	}
	if err := waitReady(ctx, api.proc, o.ReadyTimeout, api.check); err != nil {
		return nil, fmt.Errorf("kubecluster: attach %s: %w", o.Dir, err)
	}
	if err := c.connect(); err != nil {
		return nil, err
	}
	return c, nil
}
