package diagram

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/trace"
)

var (
	mmMessage = regexp.MustCompile(`^    (P\d+)(->>|-->>)(P\d+): (.*)$`)
	mmNote    = regexp.MustCompile(`^    Note over (P\d+(?:,P\d+)?): (.*)$`)
	mmEntity  = regexp.MustCompile(`#(\d+);`)
)

// mmDecode undoes mermaidEscape and the <br/> line breaks, as Mermaid does
// when it renders.
func mmDecode(s string) string {
	s = strings.ReplaceAll(s, "<br/>", "\n")
	return mmEntity.ReplaceAllStringFunc(s, func(e string) string {
		n, _ := strconv.Atoi(e[1 : len(e)-1])
		return string(rune(n))
	})
}

func mmLines(out string) []string {
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

func TestMermaidNodePort(t *testing.T) {
	tr := nodePortTrace()
	lines := mmLines(Mermaid(tr))
	if lines[0] != "sequenceDiagram" {
		t.Fatalf("first line %q, want sequenceDiagram", lines[0])
	}
	var participants []string
	type msg struct{ from, arrow, to, label string }
	var msgs []msg
	var notes [][2]string
	for _, l := range lines[1:] {
		if p, ok := strings.CutPrefix(l, "    participant "); ok {
			participants = append(participants, p)
		}
		if m := mmMessage.FindStringSubmatch(l); m != nil {
			msgs = append(msgs, msg{m[1], m[2], m[3], mmDecode(m[4])})
		}
		if m := mmNote.FindStringSubmatch(l); m != nil {
			notes = append(notes, [2]string{m[1], mmDecode(m[2])})
		}
	}
	wantParts := []string{"P1 as client<br/>", "P2 as node1<br/>", "P3 as node2<br/>", "P4 as default/my-nginx-abc<br/>"}
	if len(participants) != len(wantParts) {
		t.Fatalf("participants %q, want %d", participants, len(wantParts))
	}
	for i, w := range wantParts {
		if !strings.HasPrefix(participants[i], w) {
			t.Errorf("participant %d is %q, want %q…", i+1, participants[i], w)
		}
	}
	want := []msg{
		{"P1", "->>", "P2", tr.Hops[0].Leave.String()},
		{"P2", "->>", "P3", tr.Hops[1].Leave.String()},
		{"P3", "->>", "P4", tr.Hops[2].Leave.String()},
		{"P4", "-->>", "P3", tr.Reply[0].Leave.String()},
		{"P3", "-->>", "P2", tr.Reply[1].Leave.String()},
		{"P2", "-->>", "P1", tr.Reply[2].Leave.String()},
	}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages %v, want one per hop: %d", len(msgs), msgs, len(want))
	}
	for i, w := range want {
		m := msgs[i]
		if m.from != w.from || m.arrow != w.arrow || m.to != w.to || !strings.HasPrefix(m.label, w.label+"\n") {
			t.Errorf("message %d is %v, want %s%s%s labelled %q", i, m, w.from, w.arrow, w.to, w.label)
		}
	}
	if !strings.Contains(msgs[1].label, "arrives as "+tr.Hops[2].Arrive.String()) {
		t.Errorf("message %q does not say the mark is left behind", msgs[1].label)
	}
	// A note per rewrite, over its place, with before and after.
	for _, hops := range [][]trace.Hop{tr.Hops, tr.Reply} {
		for _, h := range hops {
			for _, rw := range h.Rewrites {
				found := false
				for _, n := range notes {
					if n[0] == "P2" && strings.HasPrefix(n[1], string(rw.Kind)+" ") &&
						strings.Contains(n[1], "\n"+rw.Before.String()+"\n") && strings.Contains(n[1], "⇒ "+rw.After.String()) {
						found = true
					}
				}
				if !found {
					t.Errorf("no note over node1 for %s %s ⇒ %s", rw.Kind, rw.Before, rw.After)
				}
			}
		}
	}
	choice := false
	for _, n := range notes {
		if n[0] == "P2" && strings.HasPrefix(n[1], "endpoint choice for default/my-nginx:80/tcp at node1") &&
			strings.Contains(n[1], "▸ 192.168.2.5:80 default/my-nginx-abc on node2 p=1/2 ← chosen") {
			choice = true
		}
	}
	if !choice {
		t.Error("no note for the endpoint choice")
	}
	last := mmNote.FindStringSubmatch(lines[len(lines)-1])
	if last == nil || last[1] != "P1,P4" || !strings.HasPrefix(mmDecode(last[2]), "verdict: delivered at pod default/my-nginx-abc on node2\n") {
		t.Errorf("last line %q is not the verdict over all participants", lines[len(lines)-1])
	}
}

// TestMermaidDropped is a golden test: the dropped trace, whole.
func TestMermaidDropped(t *testing.T) {
	want := `sequenceDiagram
    title svcnet trace#58; client → 172.26.236.177#58;30081 (Service default/my-nginx-local, NodePort)
    participant P1 as client<br/>external 172.26.236.1 netns svcnet-client
    participant P2 as node1<br/>node 172.26.236.177 netns svcnet-node1
    P1->>P2: tcp 172.26.236.1#58;50123 → 172.26.236.177#58;30081<br/>route#58; 172.26.236.0/24 dev eth0
    Note over P2: dropped#58; no local endpoints#58; traffic policy Local keeps the packet on this node, and there is no endpoint here [svcnet external-JGSQYRSA-default/my-nginx-local/tcp/ rule 0#58; meta l4proto tcp counter drop comment #34;no local endpoints#34;]
    Note over P1,P2: verdict#58; dropped at node node1<br/>no local endpoints#58; traffic policy Local keeps the packet on this node, and there is no endpoint here [svcnet external-JGSQYRSA-default/my-nginx-local/tcp/ rule 0#58; meta l4proto tcp counter drop comment #34;no local endpoints#34;]<br/>0 rewrites, 1 node hop
`
	if got := Mermaid(droppedTrace()); got != want {
		t.Errorf("Mermaid(dropped) =\n%s\nwant\n%s", got, want)
	}
}

func TestMermaidEscapes(t *testing.T) {
	tr := droppedTrace()
	tr.Verdict.Reason = `dropped; by rule #3: "ct state invalid" <b>100%%</b> & more`
	tr.Hops[1].End = "a;b#c\nd"
	out := Mermaid(tr)
	for i, l := range mmLines(out) {
		// What is left of the line without the arrows, the line breaks and
		// the entity codes must be free of syntax.
		rest := strings.NewReplacer("-->>", "", "->>", "", "<br/>", "").Replace(mmEntity.ReplaceAllString(l, ""))
		if strings.ContainsAny(rest, ";#%\"<>&") {
			t.Errorf("line %d %q keeps a character Mermaid reads as syntax", i+1, l)
		}
	}
	if !strings.Contains(out, "Note over P2: a#59;b#35;c d\n") {
		t.Errorf("the hop's end is not escaped as a#59;b#35;c d:\n%s", out)
	}
	last := mmNote.FindStringSubmatch(mmLines(out)[len(mmLines(out))-1])
	if last == nil || !strings.Contains(mmDecode(last[2]), "\n"+tr.Verdict.Reason+"\n") {
		t.Errorf("the verdict note does not decode to the reason %q", tr.Verdict.Reason)
	}
}

func TestMermaidDeterministic(t *testing.T) {
	for name, tr := range fixtures() {
		if a, b := Mermaid(tr), Mermaid(tr); a != b {
			t.Errorf("%s: two renders differ", name)
		}
	}
	if !strings.HasPrefix(Mermaid(nil), "sequenceDiagram\n") {
		t.Error("a nil trace does not render")
	}
}
