package trace

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints the trace for humans: the request, each hop with its
// netfilter steps (hook, chain, rule and its text), rewrites as before ⇒
// after, the endpoint choice, routing, the reply, the verdict and a summary.
func WriteText(w io.Writer, tr *Trace) error {
	b := &strings.Builder{}
	r := tr.Request
	fmt.Fprintf(b, "trace %s", r.Packet)
	if r.Service != "" {
		fmt.Fprintf(b, "  (Service %s", r.Service)
		if r.Frontend != "" {
			fmt.Fprintf(b, ", %s", r.Frontend)
		}
		b.WriteString(")")
	}
	b.WriteString("\n")
	fmt.Fprintf(b, "  from %s to %s; rules: %s\n", r.From, r.To, r.Rules)
	switch {
	case r.EphemeralPort && r.EphemeralNetNS != "":
		fmt.Fprintf(b, "  source port %d is ephemeral: picked by the kernel of netns %s (a port no socket holds, from its ip_local_port_range) and held for the probe\n",
			r.Packet.Src.Port(), r.EphemeralNetNS)
	case r.EphemeralPort:
		fmt.Fprintf(b, "  source port %d is ephemeral: picked by the tracer from %d-%d, as the kernel picks one (ip_local_port_range)\n",
			r.Packet.Src.Port(), ephemeralLow, ephemeralHigh)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(b, "  note: %s\n", n)
	}
	n := 0
	for i, h := range tr.Hops {
		n++
		var socket *SocketLB
		if i == 0 && tr.Socket != nil && tr.Socket.Held {
			socket = tr.Socket
		}
		writeHop(b, n, h, tr.Choice, socket, r.Packet, tr.TC)
	}
	if len(tr.Reply) > 0 {
		switch {
		case tr.Socket.Translated() && tr.Summary.ReplyRewrites == 0:
			b.WriteString("\nreply (nothing to translate back: the connect was translated at the socket):\n")
		case tr.TC.Translated():
			by, verb := reversedBy(tr.Reply), "translates"
			if strings.Contains(by, " and ") {
				verb = "translate"
			}
			fmt.Fprintf(b, "\nreply (%s %s it back):\n", by, verb)
		default:
			b.WriteString("\nreply (conntrack translates it back):\n")
		}
		for _, h := range tr.Reply {
			n++
			writeHop(b, n, h, nil, nil, Tuple{}, tr.TC)
		}
	}
	fmt.Fprintf(b, "\nverdict: %s at %s: %s\n", tr.Verdict.Kind, tr.Verdict.Place, tr.Verdict.Reason)
	fmt.Fprintf(b, "summary: %s\n", summaryText(tr))
	_, err := io.WriteString(w, b.String())
	return err
}

// writeHop prints one hop; socket, when set, is the socket load balancer's
// work on the sender's connect of dialled, before the hop's first packet;
// x is the tc load balancer's decision, shown where its step is.
func writeHop(b *strings.Builder, n int, h Hop, choice *Choice, socket *SocketLB, dialled Tuple, x *TCLB) {
	fmt.Fprintf(b, "\n%2d. %s", n, h.Place)
	var attrs []string
	if h.Place.Addr.IsValid() {
		attrs = append(attrs, h.Place.Addr.String())
	}
	if h.Place.NetNS != "" {
		attrs = append(attrs, "netns "+h.Place.NetNS)
	}
	if h.In != "" {
		attrs = append(attrs, "in on "+h.In)
	}
	if len(attrs) > 0 {
		fmt.Fprintf(b, " (%s)", strings.Join(attrs, ", "))
	}
	b.WriteString("\n")
	if socket != nil {
		writeSocket(b, socket, choice, dialled)
	}
	verb := "arrives"
	if h.In == "" {
		verb = "sends"
	}
	if !socket.Refused() {
		fmt.Fprintf(b, "    %-9s %s\n", verb, h.Arrive)
	}
	egress := h.TC != nil && strings.HasPrefix(h.TC.Hook, "tc egress")
	if h.TC != nil && !egress {
		writeTC(b, h.TC, x, choice)
	}
	for _, s := range h.Steps {
		writeStep(b, s)
	}
	if egress {
		writeTC(b, h.TC, x, choice)
	}
	for _, rw := range h.Rewrites {
		fmt.Fprintf(b, "    %-9s %s  ⇒  %s\n", rw.Kind, rw.Before, rw.After)
		fmt.Fprintf(b, "              at %s by %s", rw.Hook, rw.By)
		if rw.Mark != 0 {
			fmt.Fprintf(b, ", asked for by mark 0x%x", rw.Mark)
		}
		b.WriteString("\n")
	}
	if choice != nil && !choice.Socket && !choice.TC && h.Place.Kind == PlaceNode && h.Place.Name == choice.Node {
		writeChoice(b, choice)
	}
	if h.Route != nil {
		fmt.Fprintf(b, "    %-9s %s → %s", "route", h.Route.Text, h.Route.Next)
		if h.Route.Link != "" {
			fmt.Fprintf(b, " [%s]", h.Route.Link)
		}
		b.WriteString("\n")
	}
	if h.Leave != nil && *h.Leave != h.Arrive {
		fmt.Fprintf(b, "    %-9s %s\n", "leaves", *h.Leave)
	}
	if h.End != "" {
		fmt.Fprintf(b, "    %-9s %s\n", "end", h.End)
	}
}

// writeStep prints one netfilter step; a rule's text follows on its own line.
func writeStep(b *strings.Builder, s Step) {
	switch s.Action {
	case "hook":
		fmt.Fprintf(b, "    %-11s hook\n", s.Hook)
		return
	case "chain":
		fmt.Fprintf(b, "    %-11s   %s %s (%s)\n", s.Hook, s.Table, s.Chain, s.Detail)
		return
	case "route":
		fmt.Fprintf(b, "    %-11s   %s\n", "routing", s.Detail)
		return
	}
	where := s.Chain
	if s.Rule >= 0 {
		where = fmt.Sprintf("%s #%d", s.Chain, s.Rule)
	}
	line := s.Action
	if s.Target != "" {
		line += " " + s.Target
	}
	if s.Detail != "" {
		line += ": " + s.Detail
	}
	fmt.Fprintf(b, "    %-11s     %s  %s\n", s.Hook, where, line)
	// A rule that did not match is named by the match that failed, in nft
	// syntax; the rule itself is shown too when that match is not its text
	// (a rule translated from iptables).
	failed, _, _ := strings.Cut(s.Detail, ": ")
	if s.Text != "" && (s.Action != "no-match" || !strings.Contains(s.Text, failed)) {
		fmt.Fprintf(b, "    %-11s       rule: %s\n", "", s.Text)
	}
}

// writeSocket prints the socket load balancer's work at connect(): the
// hook, the services map entry, the endpoint choice (c) or the refusal, and
// what getpeername reports.
func writeSocket(b *strings.Builder, s *SocketLB, c *Choice, dialled Tuple) {
	fmt.Fprintf(b, "    %-9s %s\n", "connect", dialled)
	fmt.Fprintf(b, "              at %s of node %s's cgroup: the socket load balancer, before any packet exists\n", s.Hook, s.Node)
	n := len(s.Backends)
	entry := fmt.Sprintf("%d backend%s", n, plural(n))
	if n == 0 {
		entry = "no backends"
	}
	fmt.Fprintf(b, "    %-9s services map %s/%s → %s (%s, %s)\n", "entry", s.Frontend, s.Proto, entry, s.Service, s.Kind)
	if n == 0 {
		return // the hop's end says the connect is refused
	}
	if c != nil && c.Socket {
		writeChoice(b, c)
	}
	fmt.Fprintf(b, "    %-9s connected to %s instead: its packets carry the backend's address, so no rule translates them (no DNAT, no conntrack NAT)\n", "backend", s.Backend)
	fmt.Fprintf(b, "    %-9s reports %s (the reverse map), the address the sender dialled\n", "getpeer", s.Frontend)
}

func writeChoice(b *strings.Builder, c *Choice) {
	fmt.Fprintf(b, "    %-9s %s, %s endpoints", "endpoint", c.Service, c.Set)
	if c.Affinity != "" {
		fmt.Fprintf(b, "; %s", c.Affinity)
	}
	if c.Socket || c.TC {
		fmt.Fprintf(b, "; one of %d backend%s, %s", len(c.Candidates), plural(len(c.Candidates)), c.Scheduler)
	}
	b.WriteString(":\n")
	for _, cand := range c.Candidates {
		mark := " "
		if cand.Chosen {
			mark = "✓"
		}
		where := ""
		if cand.Pod != "" {
			where = fmt.Sprintf("pod %s on %s", cand.Pod, cand.Node)
		}
		if cand.Terminating {
			where += " (terminating)"
		}
		fmt.Fprintf(b, "              %s %-6s %-24s %s\n", mark, cand.Probability, cand.Endpoint, where)
	}
}

// summaryText counts rewrites and hops in words.
func summaryText(tr *Trace) string {
	var kinds []string
	for _, h := range tr.Hops {
		for _, rw := range h.Rewrites {
			kinds = append(kinds, fmt.Sprintf("%s at %s", rw.Kind, h.Place.Name))
		}
	}
	s := ""
	if sk := tr.Socket; sk.Translated() {
		s = fmt.Sprintf("connect() to %s translated to %s by the socket load balancer (%s of node %s); ", sk.Frontend, sk.Backend, sk.Hook, sk.Node)
	}
	if x := tr.TC; x.Remote() {
		s = fmt.Sprintf("sent to %s by the tc load balancer (%s of node %s), past its netfilter both ways; ", x.Backend, x.Hook, x.Node)
	} else if x.Translated() {
		s = fmt.Sprintf("sent to %s by the tc load balancer (%s of node %s) before netfilter; ", x.Backend, x.Hook, x.Node)
	}
	s += fmt.Sprintf("%d rewrite%s on the way in", tr.Summary.Rewrites, plural(tr.Summary.Rewrites))
	if len(kinds) > 0 {
		s += " (" + strings.Join(kinds, ", ") + ")"
	}
	if len(tr.Reply) > 0 {
		by := reversedBy(tr.Reply)
		s += fmt.Sprintf(", %d reversed by %s on the way back", tr.Summary.ReplyRewrites, by)
	}
	s += fmt.Sprintf("; %d node hop%s", tr.Summary.NodeHops, plural(tr.Summary.NodeHops))
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// writeTC prints a tc program's work on a hop: for the connection's first
// packet, the services map entry x and the endpoint choice c too.
func writeTC(b *strings.Builder, st *TCStep, x *TCLB, c *Choice) {
	fmt.Fprintf(b, "    %-9s at %s: the tc load balancer (svcnet proxy --ebpf-external)", "tc", st.Hook)
	if strings.HasPrefix(st.Hook, "tc ingress") {
		b.WriteString(", before netfilter")
	} else {
		b.WriteString(", after netfilter")
	}
	b.WriteString("\n")
	if st.Action != "revnat" && x != nil {
		n := len(x.Backends)
		policy := "Cluster"
		if x.LocalPolicy {
			policy = "Local"
		}
		fmt.Fprintf(b, "    %-9s services map %s/%s → %d backend%s (%s, %s, externalTrafficPolicy %s)\n", "entry", x.Frontend, x.Proto, n, plural(n), x.Service, x.Kind, policy)
		if c != nil && c.TC {
			writeChoice(b, c)
		}
	}
	fmt.Fprintf(b, "    %-9s %s\n", st.Action, st.Detail)
}

// reversedBy names what translated the reply back: conntrack, the tc load
// balancer, or both.
func reversedBy(reply []Hop) string {
	ct, tc := false, false
	for _, h := range reply {
		for _, rw := range h.Rewrites {
			if strings.HasPrefix(rw.Hook, "tc ") {
				tc = true
			} else {
				ct = true
			}
		}
	}
	switch {
	case ct && tc:
		return "conntrack and the tc load balancer"
	case tc:
		return "the tc load balancer"
	}
	return "conntrack"
}
