package lab

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/netns"
)

// List returns the names of the labs that are up (their state holds
// lab.json), sorted. None is not an error.
func List() ([]string, error) {
	entries, err := os.ReadDir(topology.RunRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("labs: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || topology.ValidateName(e.Name()) != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(topology.RunRoot, e.Name(), "lab.json")); err == nil {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// Places returns where a lab command can start from, as Resolve takes
// them: client, the nodes, then the running pods (NAME in namespace
// default, NAMESPACE/NAME in another), sorted.
func (l *Lab) Places(ctx context.Context) ([]string, error) {
	out := []string{"client"}
	for i := 1; i <= l.c.Info.Nodes; i++ {
		out = append(out, topology.NodeName(i))
	}
	r, err := l.Get(ctx)
	if err != nil {
		return nil, err
	}
	var pods []string
	for _, p := range r.Pods {
		if !netns.Exists(l.c.Names.Pod(p.Namespace, p.Name)) {
			continue
		}
		name := p.Name
		if p.Namespace != "default" {
			name = p.Namespace + "/" + p.Name
		}
		pods = append(pods, name)
	}
	slices.Sort(pods)
	return append(out, pods...), nil
}
