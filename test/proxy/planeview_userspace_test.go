package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	usplane "github.com/svcnet/svcnet/internal/dataplane/userspace"
	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
	"github.com/svcnet/svcnet/internal/nft/netlink"
)

// usView is the userspace plane: per family its redirect table
// (usplane.TableName), read back over netlink as the plane reads it, and
// the proxy ports the redirects lead to, sockets of the running proxy
// process in the node namespace. The plane has no masquerade, no mark and
// no egress masquerade of its own (internal/dataplane/userspace/doc.go):
// the endpoint sees the proxy's own connection, from the node.
type usView struct{ c *cluster }

// Chains of the redirect table the view reads: the redirects of traffic
// arriving on an interface (kube-proxy's KUBE-PORTALS-CONTAINER).
const usPortals = "portals-container"

// usTables returns the plane's table of each family that has one.
func (v *usView) usTables() (map[ipfamily.Family]*nft.Table, error) {
	conn, err := netlink.New(v.c.node)
	if err != nil {
		return nil, fmt.Errorf("nftables in node: %w", err)
	}
	defer conn.Close()
	out := map[ipfamily.Family]*nft.Table{}
	for _, f := range ipfamily.All {
		t, err := conn.Read(context.Background(), f, usplane.TableName)
		switch {
		case errors.Is(err, nft.ErrNoTable):
		case err != nil:
			return nil, fmt.Errorf("read %s %s in node: %w", nft.Keyword(f), usplane.TableName, err)
		default:
			out[f] = t
		}
	}
	return out, nil
}

// mustTables is usTables that fails the test on error.
func (v *usView) mustTables() map[ipfamily.Family]*nft.Table {
	v.c.t.Helper()
	ts, err := v.usTables()
	if err != nil {
		v.c.t.Fatal(err)
	}
	return ts
}

// usRedirect is one redirect rule: traffic of proto to addr:port goes to
// the proxy port of the rule's family.
type usRedirect struct {
	proto     string
	addr      netip.Addr
	port      int
	proxyPort uint16
}

// redirects returns chain's rules that match one destination address,
// protocol and port and redirect to a proxy port.
func redirects(t *nft.Table, chain string) []usRedirect {
	c := t.Chains[chain]
	if c == nil {
		return nil
	}
	var out []usRedirect
	for _, r := range c.Rules {
		var rd usRedirect
		for _, e := range r.Exprs {
			switch e := e.(type) {
			case nft.AddrMatch:
				if e.Field == nft.FieldDaddr && !e.Neq && e.Prefix.IsSingleIP() {
					rd.addr = e.Prefix.Addr()
				}
			case nft.ProtoMatch:
				rd.proto, _ = nft.ProtoName(e.Proto)
			case nft.PortMatch:
				if e.Field == nft.FieldDport {
					rd.port = int(e.Port)
				}
			case nft.Redirect:
				rd.proxyPort = e.Port
			}
		}
		if rd.addr.IsValid() && rd.proto != "" && rd.port != 0 && rd.proxyPort != 0 {
			out = append(out, rd)
		}
	}
	return out
}

// reSSProcess is the process column of `ss -p`: users:(("svcnet",pid=12,fd=9)).
var reSSProcess = regexp.MustCompile(`\("([^"]+)",pid=(\d+),`)

// proxyPorts returns the sockets the running proxy processes listen on in
// the node namespace, as "tcp 4 40001" (protocol, family, port), and the
// listing read.
func (v *usView) proxyPorts() (map[string]bool, string) {
	out, err := v.c.nodeRun("ss", "-H", "-l", "-n", "-t", "-u", "-p")
	if err != nil {
		return nil, fmt.Sprintf("ss in node: %v: %s", err, out)
	}
	pids := map[int]bool{}
	v.c.mu.Lock()
	for _, p := range v.c.proxies {
		if p.running() {
			pids[p.Pid()] = true
		}
	}
	v.c.mu.Unlock()
	ports := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 7 {
			continue
		}
		ap, err := netip.ParseAddrPort(f[4])
		m := reSSProcess.FindStringSubmatch(line)
		if err != nil || m == nil {
			continue
		}
		if pid, _ := strconv.Atoi(m[2]); pids[pid] {
			ports[fmt.Sprintf("%s %d %d", f[0], ipfamily.Of(ap.Addr()), ap.Port())] = true
		}
	}
	return ports, out
}

// frontends are the ClusterIPs, external IPs and LB IPs whose traffic
// arriving on an interface is redirected to a proxy port the running proxy
// listens on (a redirect to a closed port, as a stopped proxy's table
// holds, serves nothing).
func (v *usView) frontends() ([]string, string) {
	ports, listing := v.proxyPorts()
	tables := v.mustTables()
	var keys []string
	var dump strings.Builder
	for _, f := range ipfamily.All {
		t := tables[f]
		if t == nil {
			continue
		}
		fmt.Fprintf(&dump, "%s %s:\n", nft.Keyword(f), usPortals)
		for _, rd := range redirects(t, usPortals) {
			listens := ports[fmt.Sprintf("%s %d %d", rd.proto, f, rd.proxyPort)]
			fmt.Fprintf(&dump, "  %s %s -> :%d (proxy listens: %v)\n", rd.proto, netip.AddrPortFrom(rd.addr, uint16(rd.port)), rd.proxyPort, listens)
			if listens {
				keys = append(keys, frontendKey(rd.proto, rd.addr, rd.port))
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys), dump.String() + "node sockets:\n" + listing
}

func (v *usView) nodePortAddrs() ([]netip.Addr, string) {
	var addrs []netip.Addr
	var dump strings.Builder
	for f, t := range v.mustTables() {
		s := t.Sets["nodeport-ips"]
		if s == nil {
			fmt.Fprintf(&dump, "%s: no nodeport-ips set\n", nft.Keyword(f))
			continue
		}
		for _, e := range s.Elements {
			addrs = append(addrs, e.Key[0].Addr)
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	fmt.Fprintf(&dump, "nodeport-ips: %v", addrs)
	return addrs, dump.String()
}

// findRule returns the first rule of the plane's tables with an expression
// that match accepts, rendered with its family and chain.
func (v *usView) findRule(match func(nft.Expr) bool) (string, bool) {
	tables := v.mustTables()
	for _, f := range ipfamily.All {
		t := tables[f]
		if t == nil {
			continue
		}
		for _, n := range t.ChainNames() {
			for _, r := range t.Chains[n].Rules {
				if slices.ContainsFunc(r.Exprs, match) {
					return fmt.Sprintf("%s chain %s: %s", nft.Keyword(f), n, r.Render(f)), true
				}
			}
		}
	}
	return "", false
}

// checkMark: the plane has no Service masquerade, so --masquerade-bit has
// nothing to apply to: no rule of its tables marks or tests a mark (the
// egress masquerade chain masquerades by source, without a mark).
func (v *usView) checkMark(mark uint32) error {
	if r, ok := v.findRule(func(e nft.Expr) bool {
		switch e.(type) {
		case nft.MarkMatch, nft.SetMark:
			return true
		}
		return false
	}); ok {
		return fmt.Errorf("userspace plane (no masquerade, mark %#x unused) has %s", mark, r)
	}
	return nil
}

// egressMasquerade: the plane's table has the nftables plane's egress
// masquerade chain (a node setting every plane programs).
func (v *usView) egressMasquerade() (bool, string) {
	out, err := v.c.nodeRun("nft", "list", "chain", "ip", usplane.TableName, "egress-masquerading")
	return err == nil && strings.Contains(out, "masquerade fully-random"), out
}

// objects are the node's svcnet tables, whoever made them (the userspace
// plane makes only its redirect table in each family).
func (v *usView) objects() []string { return (&nftView{c: v.c}).objects() }

func (v *usView) wantRunning() []string {
	return []string{"table ip " + usplane.TableName, "table ip6 " + usplane.TableName}
}

func (v *usView) addBystander() { (&nftView{c: v.c}).addBystander() }

func (v *usView) bystander() (bool, string) { return (&nftView{c: v.c}).bystander() }

func (v *usView) drift(name string) []string {
	switch name {
	case "flush-table":
		return []string{"nft", "flush", "table", "ip", usplane.TableName}
	case "delete-table":
		return []string{"nft", "delete", "table", "ip", usplane.TableName}
	}
	v.c.t.Fatalf("userspace: no drift %q", name)
	return nil
}

func (v *usView) dump() string {
	rs, _ := v.c.nodeRun("nft", "list", "ruleset")
	ss, _ := v.c.nodeRun("ss", "-H", "-l", "-n", "-t", "-u", "-p")
	return "node nft ruleset:\n" + tail(rs, 300) + "\nnode sockets:\n" + ss
}
