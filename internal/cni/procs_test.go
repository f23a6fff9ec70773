package cni_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	types100 "github.com/containernetworking/cni/pkg/types/100"
)

// exec runs the plugin as a runtime does: this test binary (plugin mode, see
// TestMain) as a separate process in the node's namespace, CNI_* in the
// environment, conf on stdin. It returns stdout (the result or the error
// JSON) and the process's error.
func (l *lab) exec(cmd string, p *pod, conf []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "ip", "netns", "exec", l.node.Name(), os.Args[0])
	c.Env = append(os.Environ(), "CNI_COMMAND="+cmd, "CNI_IFNAME=eth0", "CNI_PATH=/nonexistent")
	if p != nil {
		c.Env = append(c.Env, "CNI_CONTAINERID="+p.id, "CNI_NETNS="+p.ns.Path())
	}
	c.Stdin = bytes.NewReader(conf)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		err = fmt.Errorf("%w (stderr %q)", err, stderr.String())
	}
	return out, err
}

// Many plugin processes adding pods to one node at once get distinct
// addresses: the IPAM store's flock serialises separate processes.
func TestConcurrentProcessesGetDistinctAddresses(t *testing.T) {
	l := newLab(t, podCIDR4, podCIDR6)
	const n = 8
	pods := make([]*pod, n)
	for i := range pods {
		pods[i] = l.newPod()
	}
	type res struct {
		out []byte
		err error
	}
	results := make(chan res, n)
	conf := l.config(nil)
	for _, p := range pods {
		go func() {
			out, err := l.exec("ADD", p, conf)
			results <- res{out, err}
		}()
	}
	seen := map[netip.Addr]bool{}
	for range n {
		r := <-results
		if r.err != nil {
			t.Fatalf("ADD process: %v\n%s", r.err, r.out)
		}
		parsed, err := types100.NewResult(r.out)
		if err != nil {
			t.Fatalf("result %q: %v", r.out, err)
		}
		for _, v6 := range []bool{false, true} {
			a := podIP(t, parsed.(*types100.Result), v6)
			if seen[a] {
				t.Errorf("%s handed out twice", a)
			}
			seen[a] = true
		}
	}
	if len(l.allocations()) != 2*n {
		t.Fatalf("IPAM store holds %v, want %d addresses", l.allocations(), 2*n)
	}
	// Every pod reaches the gateway: the concurrent ADDs made one bridge.
	for _, p := range pods {
		if _, err := ping(p.ns, netip.MustParseAddr(gw4)); err != nil {
			t.Errorf("pod %s: %v", p.id, err)
		}
	}
	// And concurrent DELs free everything.
	for _, p := range pods {
		go func() {
			out, err := l.exec("DEL", p, conf)
			results <- res{out, err}
		}()
	}
	for range n {
		if r := <-results; r.err != nil {
			t.Errorf("DEL process: %v\n%s", r.err, r.out)
		}
	}
	if got := l.allocations(); len(got) != 0 {
		t.Fatalf("after concurrent DELs: %v", got)
	}
}
