package cni_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/cni"
	"github.com/svcnet/svcnet/internal/cni/cnitest"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// runArgs runs one plugin command with raw arguments in the node's
// namespace. A command that has not returned after 20 s fails the test; if
// it is stuck opening the FIFO unblock (a reader waits for a writer), the
// FIFO is opened for writing to release it first.
func (l *lab) runArgs(cmd string, args *skel.CmdArgs, unblock string) ([]byte, error) {
	l.t.Helper()
	type res struct {
		out []byte
		err error
	}
	done := make(chan res, 1)
	go func() {
		out, err := l.runRaw(cmd, args)
		done <- res{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-time.After(20 * time.Second):
		if unblock != "" {
			if fd, err := unix.Open(unblock, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
				unix.Close(fd)
			}
		}
		<-done
		l.t.Fatalf("%s %q/%q with CNI_NETNS %q did not return within 20 s", cmd, args.ContainerID, args.IfName, args.Netns)
		return nil, nil
	}
}

// kernelState renders what the plugin could change in the node's and the
// pod's namespaces: links (with aliases), global addresses (link-local ones
// come and go with DAD), hostport tables. It reads ip's standard output only
// and drops the name of a veth peer's namespace, which ip resolves (or
// warns about on stderr) differently from one call to the next.
func (l *lab) kernelState(p *pod) string {
	l.t.Helper()
	ip := func(ns *netns.NS, argv ...string) string {
		out, err := ns.Command(append([]string{"ip", "-o"}, argv...)...).Output()
		if err != nil {
			l.t.Fatalf("ip %s: %v", strings.Join(argv, " "), err)
		}
		return linkNetNS.ReplaceAllString(string(out), "")
	}
	return strings.Join([]string{
		ip(l.node, "link", "show"),
		ip(l.node, "addr", "show", "scope", "global"),
		l.hostportTables(),
		ip(p.ns, "link", "show"),
		ip(p.ns, "addr", "show", "scope", "global"),
	}, "\n")
}

var linkNetNS = regexp.MustCompile(` link-netns(id)? \S+`)

// Hostile CNI_CONTAINERID, CNI_IFNAME, CNI_NETNS, network names, dataDirs
// and valid-attachments lists through ADD, CHECK, DEL and GC, next to a
// working attachment: each is refused with its CNI code and a message naming
// the variable or field and the value, and nothing changes, neither in the
// test's directory tree (which holds the IPAM store, the parent of the
// default stores and files a traversal would reach) nor in the kernel.
func TestHostileInputsTouchNothing(t *testing.T) {
	l := newLab(t, podCIDR4, podCIDR6)
	root := filepath.Dir(l.dataDir)
	defaultDir := filepath.Join(root, "lib", "cni", "networks")
	cni.SetDefaultDataDir(t, defaultDir)
	for _, d := range []string{defaultDir, filepath.Join(root, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victim := filepath.Join(root, "tmp", "victim")
	fifo := filepath.Join(root, "fifo")
	if err := os.WriteFile(victim, []byte("not the plugin's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	keep := l.newPod()
	hostPort := portMappings(pm(8080, 80, "tcp"))
	rKeep := l.add(keep, hostPort)
	fresh := l.newPod() // a namespace nothing is attached to
	tree := cnitest.Snapshot(t, root)
	kernel := l.kernelState(keep)

	const idChars = ": invalid characters in containerID (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)"
	const ifChars = ": interface name contains / or : or whitespace characters"
	long := strings.Repeat("a", 300)
	type tc struct {
		name              string
		cmd               string
		id, ifname, netns string
		extra             map[string]any
		code              uint
		want              string // the whole Error()
	}
	var cases []tc
	for _, cmd := range []string{"ADD", "CHECK", "DEL"} {
		extra := hostPort
		if cmd == "CHECK" {
			extra = withPrev(hostPort, rKeep)
		}
		for _, id := range []struct{ id, want string }{
			{"..", `".."` + idChars},
			{"/", `"/"` + idChars},
			{"../../tmp/victim", `"../../tmp/victim"` + idChars},
			{keep.id + "/../" + keep.id, `"` + keep.id + "/../" + keep.id + `"` + idChars},
			{"a\x00b", `"a\x00b"` + idChars},
			{keep.id + "\r\neth0", `"` + keep.id + `\r\neth0"` + idChars},
			{keep.id + " ", `"` + keep.id + ` "` + idChars},
			{"ünïcode", `"ünïcode"` + idChars},
			{long, `"` + long[:64] + `"... (300 bytes): longer than 128 bytes`},
		} {
			cases = append(cases, tc{cmd + " id " + id.want[:min(len(id.want), 20)], cmd, id.id, "eth0", fresh.ns.Path(), extra,
				types.ErrInvalidEnvironmentVariables, "invalid CNI_CONTAINERID " + id.want})
		}
		for _, ifn := range []struct{ ifname, want string }{
			{"..", `"..": interface name is . or ..`},
			{"/", `"/"` + ifChars},
			{"../../tmp", `"../../tmp"` + ifChars},
			{"eth0\x00x", `"eth0\x00x": interface name contains NUL`},
			{"eth0 ", `"eth0 "` + ifChars},
			{"ünïcödé-ünï", `"ünïcödé-ünï": interface name is too long: interface name should be less than 16 characters`},
			{long, `"` + long[:64] + `"... (300 bytes): interface name is too long: interface name should be less than 16 characters`},
		} {
			cases = append(cases, tc{cmd + " ifname " + ifn.want[:min(len(ifn.want), 14)], cmd, keep.id, ifn.ifname, keep.ns.Path(), extra,
				types.ErrInvalidEnvironmentVariables, "invalid CNI_IFNAME " + ifn.want})
		}
		cases = append(cases,
			tc{cmd + " netns traversal", cmd, keep.id, "eth0", "/run/netns/../../tmp/victim", extra, types.ErrInvalidEnvironmentVariables,
				`invalid CNI_NETNS "/run/netns/../../tmp/victim": not a canonical path (".", ".." or an empty element); want /tmp/victim`},
			tc{cmd + " netns relative", cmd, keep.id, "eth0", "tmp/victim", extra, types.ErrInvalidEnvironmentVariables,
				`invalid CNI_NETNS "tmp/victim": not an absolute path`},
			tc{cmd + " network traversal", cmd, keep.id, "eth0", keep.ns.Path(), merge(extra, map[string]any{"name": "../../../tmp/victim", "dataDir": nil}),
				types.ErrInvalidNetworkConfig, `invalid network configuration; name "../../../tmp/victim": invalid characters found in network name (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)`},
			tc{cmd + " network 300 bytes", cmd, keep.id, "eth0", keep.ns.Path(), merge(extra, map[string]any{"name": long, "dataDir": nil}),
				types.ErrInvalidNetworkConfig, `invalid network configuration; name "` + long[:64] + `"... (300 bytes): longer than 103 bytes`},
			tc{cmd + " dataDir traversal", cmd, keep.id, "eth0", keep.ns.Path(), merge(extra, map[string]any{"dataDir": l.dataDir + "/../tmp"}),
				types.ErrInvalidNetworkConfig, `invalid network configuration; network "svcnet": dataDir "` + l.dataDir + `/../tmp": not a canonical path (".", ".." or an empty element); want ` + filepath.Join(root, "tmp")},
			tc{cmd + " another network's store", cmd, keep.id, "eth0", keep.ns.Path(), merge(extra, map[string]any{"name": "other"}),
				types.ErrInvalidNetworkConfig, "container " + keep.id + " interface eth0: dataDir " + l.dataDir + " is another network's IPAM store; ipam store " + l.dataDir + `: store belongs to another network "svcnet", not "other"`},
		)
	}
	for _, cmd := range []string{"ADD", "CHECK"} {
		extra := hostPort
		if cmd == "CHECK" {
			extra = withPrev(hostPort, rKeep)
		}
		cases = append(cases,
			tc{cmd + " netns missing", cmd, "c1", "eth0", "", extra, types.ErrInvalidEnvironmentVariables, `invalid CNI_NETNS "": required`},
			tc{cmd + " netns FIFO", cmd, "c1", "eth0", fifo, extra, types.ErrInvalidNetNS,
				"container c1 interface eth0: CNI_NETNS is not a network namespace; cannot open network namespace " + fifo + ": not a network namespace"},
			tc{cmd + " netns regular file", cmd, "c1", "eth0", victim, extra, types.ErrInvalidNetNS,
				"container c1 interface eth0: CNI_NETNS is not a network namespace; cannot open network namespace " + victim + ": not a network namespace"},
			tc{cmd + " netns device", cmd, "c1", "eth0", "/dev/null", extra, types.ErrInvalidNetNS,
				"container c1 interface eth0: CNI_NETNS is not a network namespace; cannot open network namespace /dev/null: not a network namespace"},
		)
	}
	cases = append(cases,
		tc{"DEL netns FIFO", "DEL", "c1", "eth0", fifo, nil, types.ErrInvalidNetNS,
			"container c1 interface eth0: CNI_NETNS is neither a network namespace nor what a deleted one leaves (p---------)"},
		tc{"DEL netns device", "DEL", "c1", "eth0", "/dev/null", nil, types.ErrInvalidNetNS,
			"container c1 interface eth0: CNI_NETNS is neither a network namespace nor what a deleted one leaves (Dc---------)"},
		tc{"GC valid-attachments id traversal", "GC", "", "", "", validAttachments(keep.id, "eth0", "../../tmp/victim", "eth0"),
			types.ErrInvalidNetworkConfig, `invalid network configuration; network "svcnet": cni.dev/valid-attachments[1].containerID "../../tmp/victim"` + idChars},
		tc{"GC valid-attachments id with line break", "GC", "", "", "", validAttachments(keep.id+"\r\neth0", "eth0"),
			types.ErrInvalidNetworkConfig, `invalid network configuration; network "svcnet": cni.dev/valid-attachments[0].containerID "` + keep.id + `\r\neth0"` + idChars},
		tc{"GC valid-attachments id 300 bytes", "GC", "", "", "", validAttachments(long, "eth0"),
			types.ErrInvalidNetworkConfig, `invalid network configuration; network "svcnet": cni.dev/valid-attachments[0].containerID "` + long[:64] + `"... (300 bytes): longer than 128 bytes`},
		tc{"GC valid-attachments ifname", "GC", "", "", "", validAttachments(keep.id, "../eth0"),
			types.ErrInvalidNetworkConfig, `invalid network configuration; network "svcnet": cni.dev/valid-attachments[0].ifname "../eth0"` + ifChars},
		tc{"GC network traversal", "GC", "", "", "", map[string]any{"name": "../../../tmp/victim", "dataDir": nil},
			types.ErrInvalidNetworkConfig, `invalid network configuration; name "../../../tmp/victim": invalid characters found in network name (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)`},
		tc{"GC another network's store", "GC", "", "", "", map[string]any{"name": "other"},
			types.ErrInvalidNetworkConfig, "network other: dataDir " + l.dataDir + " is another network's IPAM store; ipam store " + l.dataDir + `: store belongs to another network "svcnet", not "other"`},
	)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := &skel.CmdArgs{ContainerID: c.id, IfName: c.ifname, Netns: c.netns, StdinData: l.config(c.extra)}
			_, err := l.runArgs(c.cmd, args, fifo)
			var te *types.Error
			if !errors.As(err, &te) || te.Code != c.code || !strings.HasPrefix(te.Error(), c.want) {
				t.Errorf("%s: got %v\nwant code %d %q", c.cmd, err, c.code, c.want)
			}
			if d := tree.Diff(cnitest.Snapshot(t, root)); len(d) != 0 {
				t.Fatalf("the directory tree changed:\n%s", strings.Join(d, "\n"))
			}
			if k := l.kernelState(keep); k != kernel {
				t.Fatalf("the kernel changed:\n--- before\n%s\n--- after\n%s", kernel, k)
			}
		})
	}

	// The working attachment is intact, and goes away by its own DEL.
	if err := l.check(keep, hostPort, rKeep); err != nil {
		t.Fatalf("CHECK of the working attachment: %v", err)
	}
	l.del(keep, hostPort)
	if got := l.allocations(); len(got) != 0 {
		t.Fatalf("allocations after DEL: %v", got)
	}
}

// merge returns a copy of a with b's entries (a nil value is JSON null: the
// field's default).
func merge(a, b map[string]any) map[string]any {
	m := map[string]any{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

// validAttachments is GC's list of (containerID, ifname) pairs.
func validAttachments(pairs ...string) map[string]any {
	var list []map[string]string
	for i := 0; i+1 < len(pairs); i += 2 {
		list = append(list, map[string]string{"containerID": pairs[i], "ifname": pairs[i+1]})
	}
	return map[string]any{"cni.dev/valid-attachments": list}
}

// Attachments whose container ID and interface name a naive join would run
// together ("a.b"+"c" and "a"+"b.c"; "ab"+"c" and "a"+"bc") get addresses,
// veths and hostPort chains of their own, and the DEL of one leaves the
// other whole.
func TestNaiveEncodingsStayApart(t *testing.T) {
	l := newLab(t, podCIDR4)
	for i, pair := range [][2][2]string{{{"a.b", "c"}, {"a", "b.c"}}, {{"ab", "c"}, {"a", "bc"}}} {
		var pods [2]*pod
		var results [2]*types100.Result
		for j, att := range pair {
			pods[j] = &pod{ns: netnstest.New(t, "cnipod"), id: att[0]}
			hp := portMappings(pm(8080+2*i+j, 80, "tcp"))
			out, err := l.run("ADD", pods[j], att[1], l.config(hp))
			if err != nil {
				t.Fatalf("ADD %s/%s: %v", att[0], att[1], err)
			}
			r, err := types100.NewResult(out)
			if err != nil {
				t.Fatal(err)
			}
			results[j] = r.(*types100.Result)
		}
		if a, b := podIP(t, results[0], false), podIP(t, results[1], false); a == b {
			t.Fatalf("%v: both got %s", pair, a)
		}
		if results[0].Interfaces[1].Name == results[1].Interfaces[1].Name {
			t.Fatalf("%v: one node end %s", pair, results[0].Interfaces[1].Name)
		}
		// DEL of the first leaves the second as ADD made it.
		if _, err := l.run("DEL", pods[0], pair[0][1], l.config(portMappings(pm(8080+2*i, 80, "tcp")))); err != nil {
			t.Fatal(err)
		}
		hp := portMappings(pm(8080+2*i+1, 80, "tcp"))
		if _, err := l.run("CHECK", pods[1], pair[1][1], l.config(withPrev(hp, results[1]))); err != nil {
			t.Fatalf("%v: CHECK of the second after DEL of the first: %v", pair, err)
		}
		if got := l.allocations(); len(got) != 1 || got[0] != podIP(t, results[1], false).String() {
			t.Fatalf("%v: allocations after DEL of the first: %v", pair, got)
		}
		if _, err := l.run("DEL", pods[1], pair[1][1], l.config(hp)); err != nil {
			t.Fatal(err)
		}
	}
}

// A node link that has the node end's name but not the attachment's alias
// (another identity that hashes alike, or a link the plugin did not make)
// is never taken over: ADD fails with 101 and frees what it reserved, and
// neither that ADD's undo nor a DEL removes the link.
func TestNodeEndNameTakenIsRefused(t *testing.T) {
	l := newLab(t, podCIDR4)
	p := l.newPod()
	name := cni.HostVethName(p.id, "eth0")
	sh(t, l.node, "ip", "link", "add", name, "type", "veth", "peer", "name", "other0")
	sh(t, l.node, "ip", "link", "set", name, "alias", "someone else's")
	_, err := l.run("ADD", p, "eth0", l.config(nil))
	want := "container " + p.id + " interface eth0: the node end's name " + name + " is another link's; node end " + name + ` belongs to "someone else's": node end name taken`
	if cniCode(err) != cni.ErrInterfaceExists || err.Error() != want {
		t.Fatalf("ADD: %v\nwant %s", err, want)
	}
	if got := l.allocations(); len(got) != 0 {
		t.Fatalf("failed ADD kept %v", got)
	}
	l.del(p, nil)
	if out := sh(t, l.node, "ip", "-o", "link", "show", name); !strings.Contains(out, "alias someone else's") {
		t.Fatalf("the other link changed: %s", out)
	}
	if out := sh(t, p.ns, "ip", "-o", "link", "show"); strings.Contains(out, "eth0") {
		t.Fatalf("the pod kept an eth0: %s", out)
	}
}

// The longest identity the limits allow (a 103-byte network name, a
// 128-byte container ID, a 15-byte interface name) goes through ADD, CHECK
// and DEL with a hostPort: the kernel takes the 255-byte alias and the
// 248-byte rule comment, and DEL finds everything again by them.
func TestLongestIdentity(t *testing.T) {
	l := newLab(t, podCIDR4)
	l.conf["name"] = strings.Repeat("n", cni.MaxNetworkNameLen)
	p := &pod{ns: netnstest.New(t, "cnipod"), id: strings.Repeat("c", cni.MaxContainerIDLen)}
	const ifname = "abcdefghijklmno"
	hp := portMappings(pm(8080, 80, "tcp"))
	out, err := l.run("ADD", p, ifname, l.config(hp))
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	r, err := types100.NewResult(out)
	if err != nil {
		t.Fatal(err)
	}
	alias := cni.Alias(l.conf["name"].(string), p.id, ifname)
	if link := sh(t, p.ns, "ip", "-o", "link", "show", ifname); !strings.Contains(link, "alias "+alias) {
		t.Fatalf("pod interface lacks the %d-byte alias: %s", len(alias), link)
	}
	if tables := l.hostportTables(); !strings.Contains(tables, `comment "`+l.conf["name"].(string)+" "+p.id+" "+ifname+`"`) {
		t.Fatalf("hostport rules lack the owner's comment:\n%s", tables)
	}
	if _, err := l.run("CHECK", p, ifname, l.config(withPrev(hp, r.(*types100.Result)))); err != nil {
		t.Fatalf("CHECK: %v", err)
	}
	if _, err := l.run("DEL", p, ifname, l.config(hp)); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if got := l.allocations(); len(got) != 0 {
		t.Fatalf("allocations after DEL: %v", got)
	}
	if out := sh(t, l.node, "ip", "-o", "link", "show", "type", "veth"); out != "" {
		t.Fatalf("veth after DEL: %s", out)
	}
	if tables := l.hostportTables(); strings.Contains(tables, "8080") {
		t.Fatalf("hostport rules after DEL:\n%s", tables)
	}
}

// DEL when CNI_NETNS names the file a deleted namespace's bind mount was on
// (a runtime removed the mount but not yet the file): the namespace is gone,
// so DEL frees the address and the veth and succeeds.
func TestDelNetnsLeftoverFile(t *testing.T) {
	l := newLab(t, podCIDR4)
	p := l.newPod()
	l.add(p, nil)
	leftover := filepath.Join(t.TempDir(), "netns-file")
	if err := os.WriteFile(leftover, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := l.runRaw("DEL", &skel.CmdArgs{ContainerID: p.id, IfName: "eth0", Netns: leftover, StdinData: l.config(nil)}); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if got := l.allocations(); len(got) != 0 {
		t.Fatalf("allocations after DEL: %v", got)
	}
	if out := sh(t, l.node, "ip", "-o", "link", "show", "type", "veth"); out != "" {
		t.Fatalf("veth after DEL: %s", out)
	}
}
