package netlink

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var (
	reSpaces  = regexp.MustCompile(`\s+`)
	reCounter = regexp.MustCompile(`counter packets \d+ bytes \d+`)
	rePrio    = regexp.MustCompile(`priority ([a-z]+)(?: ([+-]) (\d+))?;`)
	reTCPRst  = regexp.MustCompile(`meta l4proto tcp reject with tcp reset`)
	reThPort  = regexp.MustCompile(`meta l4proto (tcp|udp|sctp) th (dport|sport)`)
	stdPrios  = map[string]int{"raw": -300, "mangle": -150, "dstnat": -100, "filter": 0, "security": 50, "srcnat": 100}
)

// normaliseList reduces nft(8) table text to a canonical form, so that
// `nft list table` output and nft.Table.Render can be compared:
//
//   - whitespace: lines trimmed, runs of blanks collapsed, blank lines dropped;
//   - order: set, map and chain blocks sorted (nft lists them in creation
//     order), set elements sorted (nft lists them in hash order);
//   - quotes dropped: nft 1.0.6 prints names like svc/a:b unquoted;
//   - what nft or the kernel add: "size 65535" of a dynamic set (the kernel's
//     default size), counter values;
//   - priorities as numbers: Render and nft name standard priorities
//     differently ("dstnat" on output, "filter - 10");
//   - nft's folding of protocol dependencies: `meta l4proto tcp reject with
//     tcp reset` lists as `reject with tcp reset`, `meta l4proto udp th dport
//     53` as `udp dport 53`.
func normaliseList(s string) string {
	s = strings.ReplaceAll(s, `"`, "")
	s = reCounter.ReplaceAllString(s, "counter")
	s = rePrio.ReplaceAllStringFunc(s, func(m string) string {
		g := rePrio.FindStringSubmatch(m)
		base, ok := stdPrios[g[1]]
		if !ok {
			return m
		}
		if g[2] != "" {
			n, _ := strconv.Atoi(g[3])
			if g[2] == "-" {
				n = -n
			}
			base += n
		}
		return "priority " + strconv.Itoa(base) + ";"
	})
	s = reTCPRst.ReplaceAllString(s, "reject with tcp reset")
	s = reThPort.ReplaceAllString(s, "$1 $2")

	var lines []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(reSpaces.ReplaceAllString(l, " "))
		if l != "" && l != "size 65535" {
			lines = append(lines, l)
		}
	}
	// Join multi-line element lists and sort their elements.
	var joined []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "elements = {") {
			joined = append(joined, l)
			continue
		}
		for !strings.HasSuffix(l, "}") && i+1 < len(lines) {
			i++
			l += " " + lines[i]
		}
		body := strings.TrimSuffix(strings.TrimPrefix(l, "elements = {"), "}")
		var els []string
		for _, e := range strings.Split(body, ",") {
			els = append(els, strings.TrimSpace(e))
		}
		sort.Strings(els)
		joined = append(joined, "elements = { "+strings.Join(els, ", ")+" }")
	}
	// Sort the blocks inside the table.
	if len(joined) < 2 {
		return strings.Join(joined, "\n")
	}
	head, tail := joined[0], joined[len(joined)-1]
	var blocks []string
	var cur []string
	for _, l := range joined[1 : len(joined)-1] {
		cur = append(cur, l)
		if l == "}" {
			blocks = append(blocks, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	if len(cur) > 0 {
		blocks = append(blocks, strings.Join(cur, "\n"))
	}
	sort.Strings(blocks)
	return head + "\n" + strings.Join(blocks, "\n") + "\n" + tail
}

var reRuleHead = regexp.MustCompile(`^(ip6?) (\S+) (\S+)( \d+)+$`)

// normaliseDebug reduces `nft --debug=netlink list table` output (the
// kernel's own expressions, one block per rule and per set) to a canonical
// form: rule handles dropped, rules grouped by chain in order, chains and sets
// sorted, set elements sorted.
func normaliseDebug(s string) string {
	if i := strings.Index(s, "\ntable "); i >= 0 {
		s = s[:i] // the listing that follows the debug output
	}
	sets := map[string][]string{}
	chains := map[string][]string{}
	var key string
	var isSet bool
	for _, l := range strings.Split(s, "\n") {
		switch {
		case strings.TrimSpace(l) == "":
		case strings.Contains(l, " @") && !strings.HasPrefix(l, "\t") && !strings.HasPrefix(l, " "):
			key, isSet = l, true
			sets[key] = nil
		case reRuleHead.MatchString(l):
			g := reRuleHead.FindStringSubmatch(l)
			key, isSet = g[1]+" "+g[2]+" "+g[3], false
			chains[key] = append(chains[key], "rule")
		case isSet:
			sets[key] = append(sets[key], strings.TrimSpace(l))
		default:
			chains[key] = append(chains[key], strings.TrimSpace(l))
		}
	}
	var out []string
	for _, k := range sortedMapKeys(sets) {
		els := sets[k]
		sort.Strings(els)
		out = append(out, k, strings.Join(els, "\n"))
	}
	for _, k := range sortedMapKeys(chains) {
		out = append(out, k, strings.Join(chains[k], "\n"))
	}
	return strings.Join(out, "\n")
}

func sortedMapKeys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
