package cni_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/cni/cnitest"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// pluginConf is the network configuration as a runtime hands it to the
// plugin (one plugin of the conflist, with the list's name and version).
func (e *env) pluginConf(extra map[string]any) []byte {
	e.t.Helper()
	m := map[string]any{
		"cniVersion": "1.1.0", "name": network, "type": "svcnet", "bridge": "cni0", "mtu": 1500,
		"subnets": []string{podCIDR4}, "dataDir": e.dataDir,
	}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// plugin runs the installed plugin in the node's namespace as a runtime
// does, without libcni's checks in between: CNI_* in the environment, conf
// on stdin. It returns the CNI error the plugin printed (nil on success) and
// fails the test if the plugin needs more than 30 s.
func (e *env) plugin(cmd, id, ifname, nsPath string, conf []byte) *types.Error {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := e.node.CommandContext(ctx, filepath.Join(cniPath, "svcnet"))
	c.Env = append(os.Environ(), "CNI_COMMAND="+cmd, "CNI_CONTAINERID="+id, "CNI_IFNAME="+ifname,
		"CNI_NETNS="+nsPath, "CNI_PATH="+cniPath)
	c.Stdin = bytes.NewReader(conf)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	if ctx.Err() != nil {
		e.t.Fatalf("%s %q/%q (CNI_NETNS %q) did not return within 30 s", cmd, id, ifname, nsPath)
	}
	var ee *exec.ExitError
	if err == nil {
		return nil
	}
	if !errors.As(err, &ee) {
		e.t.Fatalf("%s: %v", cmd, err)
	}
	var te types.Error
	if jerr := json.Unmarshal(stdout.Bytes(), &te); jerr != nil {
		e.t.Fatalf("%s: %v; stdout %q is not a CNI error (stderr %q)", cmd, err, stdout.String(), stderr.String())
	}
	return &te
}

var linkNetNS = regexp.MustCompile(` link-netns(id)? \S+`)

// kernelState renders the node's links (with aliases), global addresses and
// ruleset, and the pod's links and global addresses (ip's standard output
// only, without the name of a veth peer's namespace, which ip resolves
// differently from one call to the next).
func (e *env) kernelState(pod *netns.NS) string {
	e.t.Helper()
	run := func(ns *netns.NS, argv ...string) string {
		out, err := ns.Command(argv...).Output()
		if err != nil {
			e.t.Fatalf("%s: %v", strings.Join(argv, " "), err)
		}
		return linkNetNS.ReplaceAllString(string(out), "")
	}
	return strings.Join([]string{
		run(e.node, "ip", "-o", "link", "show"),
		run(e.node, "ip", "-o", "addr", "show", "scope", "global"),
		run(e.node, "nft", "list", "ruleset"),
		run(pod, "ip", "-o", "link", "show"),
		run(pod, "ip", "-o", "addr", "show", "scope", "global"),
	}, "\n")
}

// The installed plugin, run as a runtime runs it, refuses hostile container
// IDs, interface names, namespaces and GC lists with a CNI error (code and
// message), whether skel's checks or the plugin's catch them, and nothing
// changes: not the test's directory tree (IPAM store, libcni's cache, the
// configuration, files a traversal would reach) and not the kernel, where a
// working attachment with a hostPort stays as it was and still serves.
func TestPluginRefusesHostileInput(t *testing.T) {
	e := newEnv(t, podCIDR4)
	root := filepath.Dir(e.dataDir)
	victim := filepath.Join(root, "tmp", "victim")
	fifo := filepath.Join(root, "fifo")
	if err := os.MkdirAll(filepath.Dir(victim), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, []byte("not the plugin's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	keep := netnstest.New(t, "cnitpod")
	out := e.newOutside()
	rKeep := e.add(keep, capHostPort)
	serveWho(t, keep, 80)
	fresh := netnstest.New(t, "cnitpod")
	tree := cnitest.Snapshot(t, root)
	kernel := e.kernelState(keep)

	prev, err := json.Marshal(rKeep)
	if err != nil {
		t.Fatal(err)
	}
	checkConf := e.pluginConf(map[string]any{"prevResult": json.RawMessage(prev)})
	long := strings.Repeat("a", 300)
	const idChars = "invalid characters in containerID"
	const ifChars = "interface name contains / or : or whitespace characters"
	type tc struct {
		cmd, id, ifname, netns string
		conf                   []byte
		code                   uint
		msg                    string // the whole message
	}
	var cases []tc
	for _, cmd := range []string{"ADD", "CHECK", "DEL"} {
		conf := e.pluginConf(nil)
		if cmd == "CHECK" {
			conf = checkConf
		}
		cases = append(cases,
			tc{cmd, "../../tmp/victim", "eth0", fresh.Path(), conf, 4, idChars},
			tc{cmd, containerID(keep) + "/../" + containerID(keep), "eth0", keep.Path(), conf, 4, idChars},
			tc{cmd, ".", "eth0", fresh.Path(), conf, 4, idChars},
			tc{cmd, "ünïcode", "eth0", fresh.Path(), conf, 4, idChars},
			tc{cmd, containerID(keep) + " ", "eth0", keep.Path(), conf, 4, idChars},
			tc{cmd, long, "eth0", fresh.Path(), conf, 4, `invalid CNI_CONTAINERID "` + long[:64] + `"... (300 bytes): longer than 128 bytes`},
			tc{cmd, strings.Repeat("c", 129), "eth0", fresh.Path(), conf, 4, `invalid CNI_CONTAINERID "` + strings.Repeat("c", 64) + `"... (129 bytes): longer than 128 bytes`},
			tc{cmd, containerID(keep), "../../tmp", keep.Path(), conf, 4, ifChars},
			tc{cmd, containerID(keep), "..", keep.Path(), conf, 4, "interface name is . or .."},
			tc{cmd, containerID(keep), "eth0 ", keep.Path(), conf, 4, ifChars},
			tc{cmd, containerID(keep), "abcdefghijklmnop", keep.Path(), conf, 4, "interface name is too long"},
			tc{cmd, containerID(keep), "eth0", "/run/netns/../../tmp/victim", conf, 4,
				`invalid CNI_NETNS "/run/netns/../../tmp/victim": not a canonical path (".", ".." or an empty element); want /tmp/victim`},
		)
	}
	cases = append(cases,
		tc{"ADD", "c1", "eth0", fifo, e.pluginConf(nil), 8, "container c1 interface eth0: CNI_NETNS is not a network namespace"},
		tc{"CHECK", "c1", "eth0", fifo, checkConf, 8, "container c1 interface eth0: CNI_NETNS is not a network namespace"},
		tc{"DEL", "c1", "eth0", fifo, e.pluginConf(nil), 8, "container c1 interface eth0: CNI_NETNS is neither a network namespace nor what a deleted one leaves (p---------)"},
		tc{"GC", "", "", "", e.pluginConf(map[string]any{"cni.dev/valid-attachments": []map[string]string{{"containerID": "../../tmp/victim", "ifname": "eth0"}}}), 7,
			"invalid network configuration"},
		tc{"GC", "", "", "", e.pluginConf(map[string]any{"cni.dev/valid-attachments": []map[string]string{{"containerID": containerID(keep), "ifname": "eth0/.."}}}), 7,
			"invalid network configuration"},
		tc{"ADD", containerID(keep), "eth0", keep.Path(), e.pluginConf(map[string]any{"name": "other"}), 7,
			"container " + containerID(keep) + " interface eth0: dataDir " + e.dataDir + " is another network's IPAM store"},
	)
	for _, c := range cases {
		te := e.plugin(c.cmd, c.id, c.ifname, c.netns, c.conf)
		if te == nil || te.Code != c.code || !strings.HasPrefix(te.Msg, c.msg) {
			t.Errorf("%s %q/%q (CNI_NETNS %q): got %v, want code %d %q", c.cmd, c.id, c.ifname, c.netns, te, c.code, c.msg)
		}
		if d := tree.Diff(cnitest.Snapshot(t, root)); len(d) != 0 {
			t.Fatalf("after %s %q/%q: the directory tree changed:\n%s", c.cmd, c.id, c.ifname, strings.Join(d, "\n"))
		}
		if k := e.kernelState(keep); k != kernel {
			t.Fatalf("after %s %q/%q: the kernel changed:\n--- before\n%s\n--- after\n%s", c.cmd, c.id, c.ifname, kernel, k)
		}
	}

	if who, err := askTCP(out, node4+":8080"); err != nil || who != outside4 {
		t.Errorf("hostPort of the working attachment: %q, %v", who, err)
	}
	if _, err := e.cnitool("check", keep, capHostPort); err != nil {
		t.Errorf("check of the working attachment: %v", err)
	}
	if _, err := e.cnitool("del", keep, capHostPort); err != nil {
		t.Fatal(err)
	}
	if got := e.allocations(); len(got) != 0 {
		t.Fatalf("allocations after DEL: %v", got)
	}
}

// The longest container ID the plugin takes (128 bytes) and a 15-byte
// interface name with a hostPort, through the installed plugin: ADD wires
// the pod, DEL finds everything again and removes it.
func TestPluginLongestIdentity(t *testing.T) {
	e := newEnv(t, podCIDR4)
	p := netnstest.New(t, "cnitpod")
	id := strings.Repeat("f", 128)
	const ifname = "abcdefghijklmno"
	conf := e.pluginConf(map[string]any{"runtimeConfig": map[string]any{
		"portMappings": []map[string]any{{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}}}})
	if te := e.plugin("ADD", id, ifname, p.Path(), conf); te != nil {
		t.Fatalf("ADD: %v", te)
	}
	if got := e.allocations(); len(got) != 1 {
		t.Fatalf("allocations after ADD: %v", got)
	}
	if link := sh(t, p, "ip", "-o", "addr", "show", "dev", ifname); !strings.Contains(link, "192.168.1.2/32") {
		t.Fatalf("pod interface: %s", link)
	}
	if rules := sh(t, e.node, "nft", "list", "ruleset"); !strings.Contains(rules, network+" "+id+" "+ifname) {
		t.Fatalf("ruleset lacks the owner's comment:\n%s", rules)
	}
	if te := e.plugin("DEL", id, ifname, p.Path(), conf); te != nil {
		t.Fatalf("DEL: %v", te)
	}
	if got := e.allocations(); len(got) != 0 {
		t.Fatalf("allocations after DEL: %v", got)
	}
	if veths := sh(t, e.node, "ip", "-o", "link", "show", "type", "veth"); veths != "" {
		t.Fatalf("veths after DEL: %s", veths)
	}
	if rules := sh(t, e.node, "nft", "list", "ruleset"); strings.Contains(rules, id) {
		t.Fatalf("ruleset after DEL:\n%s", rules)
	}
}
