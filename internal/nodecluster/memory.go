package nodecluster

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/procfs"
)

// MemoryUse is the resident memory of the processes of one command in one part
// of the cluster.
type MemoryUse struct {
	// Part is "control-plane", or a node's name.
	Part string
	// Command is the processes' command name (etcd, kubelet, containerd,
	// containerd-shim, pause, ...).
	Command string
	// Procs is how many processes; RSS their resident set sizes added up, in
	// bytes.
	Procs int
	RSS   uint64
}

// Memory returns the resident memory of the cluster's processes by part and
// command, sorted.
func (c *Cluster) Memory() ([]MemoryUse, error) {
	parts := []string{"control-plane"}
	for _, n := range c.Nodes {
		parts = append(parts, n.Name)
	}
	var out []MemoryUse
	for _, part := range parts {
		pids, err := cgroupProcs(filepath.Join(c.v2, c.l.cgroupTop(), part))
		if err != nil {
			return nil, err
		}
		byComm := map[string]*MemoryUse{}
		for _, pid := range pids {
			p, err := procfs.NewProc(pid)
			if err != nil {
				continue // exited
			}
			st, err := p.NewStatus()
			if err != nil {
				continue
			}
			u := byComm[st.Name]
			if u == nil {
				u = &MemoryUse{Part: part, Command: st.Name}
				byComm[st.Name] = u
			}
			u.Procs++
			u.RSS += st.VmRSS
		}
		for _, u := range byComm {
			out = append(out, *u)
		}
	}
	slices.SortFunc(out, func(a, b MemoryUse) int {
		return cmp.Or(cmp.Compare(a.Part, b.Part), cmp.Compare(a.Command, b.Command))
	})
	return out, nil
}

// FormatMemory renders uses one line each, with the total of each part and of
// all.
func FormatMemory(uses []MemoryUse) string {
	var b strings.Builder
	var total uint64
	parts := map[string]uint64{}
	for _, u := range uses {
		fmt.Fprintf(&b, "%-14s %-20s %3d procs %7.1f MiB\n", u.Part, u.Command, u.Procs, mib(u.RSS))
		parts[u.Part] += u.RSS
		total += u.RSS
	}
	names := make([]string, 0, len(parts))
	for p := range parts {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		fmt.Fprintf(&b, "%-14s %-20s %7.1f MiB\n", p, "(total)", mib(parts[p]))
	}
	fmt.Fprintf(&b, "%-14s %-20s %7.1f MiB\n", "cluster", "(total)", mib(total))
	return b.String()
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }
