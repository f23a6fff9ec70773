package datapathbench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/bench/benchenv"
	"github.com/svcnet/svcnet/internal/netns"
)

// CPU placement. On a 2-core machine the load generator's goroutines and the
// echo servers fought over both cores, and a run's rates swung by 5-10%
// whichever path it measured. The load generator (this process) is placed on
// the first half of the CPUs and the measured pods' servers on the second
// half; everything else (control plane, node agents, proxies) stays where the
// scheduler puts it. The packets' kernel work follows its sender: a request's
// forwarding through the nodes runs on the client's CPU, a response's on the
// server's, for the direct and the Service run alike.

// cpuSets returns the load generator's and the servers' CPU sets, or ok false
// on a machine of one CPU (nothing is pinned there).
func cpuSets() (client, servers unix.CPUSet, ok bool) {
	n := runtime.NumCPU()
	if n < 2 {
		return client, servers, false
	}
	for c := range n {
		if c < n/2 {
			client.Set(c)
		} else {
			servers.Set(c)
		}
	}
	return client, servers, true
}

// pinning is what pinCPUs did, to undo it.
type pinning struct {
	pids []int // the servers' processes
	desc string
}

// pinCPUs places every thread of this process on the client set and every
// thread of each process living in one of the network namespaces nsPaths
// (the measured pods) on the servers set. It fails when a namespace holds no
// process. Undo with unpin.
func pinCPUs(nsPaths []string) (*pinning, error) {
	client, servers, ok := cpuSets()
	if !ok {
		return &pinning{desc: "1 CPU: nothing pinned"}, nil
	}
	if err := benchenv.SetAffinity(os.Getpid(), &client); err != nil {
		return nil, fmt.Errorf("pin load generator: %w", err)
	}
	p := &pinning{}
	if err := p.pinServers(nsPaths, &servers); err != nil {
		_ = p.unpin()
		return nil, err
	}
	p.desc = fmt.Sprintf("load generator on CPUs %s, the measured pods' servers (%d processes) on CPUs %s, the rest unpinned",
		cpuList(&client), len(p.pids), cpuList(&servers))
	return p, nil
}

// pinServers places the processes of the namespaces on servers, recording
// each in p.pids.
func (p *pinning) pinServers(nsPaths []string, servers *unix.CPUSet) error {
	for _, path := range nsPaths {
		pids, err := netns.PidsIn(path)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return fmt.Errorf("pin servers: no process in network namespace %s", path)
		}
		for _, pid := range pids {
			p.pids = append(p.pids, pid)
			if err := benchenv.SetAffinity(pid, servers); err != nil {
				return fmt.Errorf("pin server pid %d in %s: %w", pid, path, err)
			}
		}
	}
	return nil
}

// unpin lets this process and the servers run on every CPU again (a server
// gone meanwhile is no error).
func (p *pinning) unpin() error {
	var all unix.CPUSet
	for c := range runtime.NumCPU() {
		all.Set(c)
	}
	err := benchenv.SetAffinity(os.Getpid(), &all)
	for _, pid := range p.pids {
		_ = benchenv.SetAffinity(pid, &all)
	}
	return err
}

// cpuList prints a CPU set as "0,1".
func cpuList(s *unix.CPUSet) string {
	out := ""
	for c := range runtime.NumCPU() {
		if s.IsSet(c) {
			if out != "" {
				out += ","
			}
			out += strconv.Itoa(c)
		}
	}
	return out
}
