package iptables

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// Canonical returns rule (the text after "-A CHAIN ") as iptables-save
// prints it back, so that a rule written in any order of its options
// compares equal to the kernel's read-back:
//
//   - the address, interface and protocol options first, in the order
//     -s, -d, -i, -o, -p (each with its "!"), addresses with their prefix
//     length (/32, /128);
//   - then the matches in the order written, each with its options in
//     the order the extension prints them and with the defaults it prints
//     (recent: --mask all-ones, --rsource);
//   - comments quoted; a statistic probability as the kernel stores it
//     (a 31-bit fraction) with eleven decimals;
//   - MARK --or-mark M and --xor-mark M as --set-xmark M/M and M/0x0.
//
// It knows the matches and targets svcnet renders (comment, tcp, udp,
// sctp, statistic, recent, mark, conntrack, addrtype; DNAT, MARK,
// MASQUERADE, REJECT and plain targets) and keeps any other option as
// written. An error names what cannot be parsed.
func Canonical(f ipfamily.Family, rule string) (string, error) {
	words, err := splitWords(rule)
	if err != nil {
		return "", err
	}
	var front [5][]string // -s, -d, -i, -o, -p
	type group struct {
		head []string // "-m name" or "-j TARGET"
		opts [][]string
	}
	var groups []*group
	var cur *group
	neg := false
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "!" {
			neg = true
			continue
		}
		slot := strings.Index("sdiop", strings.TrimPrefix(w, "-"))
		if len(w) == 2 && w[0] == '-' && slot >= 0 {
			if i+1 >= len(words) {
				return "", fmt.Errorf("rule %q: %s without a value", rule, w)
			}
			v := words[i+1]
			i++
			if slot <= 1 {
				v = withPrefix(v)
			}
			front[slot] = append(negated(neg), w, v)
			neg = false
			continue
		}
		if w == "-m" || w == "-j" {
			if i+1 >= len(words) {
				return "", fmt.Errorf("rule %q: %s without a name", rule, w)
			}
			cur = &group{head: []string{w, words[i+1]}}
			groups = append(groups, cur)
			i++
			neg = false
			continue
		}
		if !strings.HasPrefix(w, "--") || cur == nil {
			return "", fmt.Errorf("rule %q: unexpected %q", rule, w)
		}
		opt := append(negated(neg), w)
		neg = false
		for i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") && words[i+1] != "!" {
			opt = append(opt, words[i+1])
			i++
		}
		cur.opts = append(cur.opts, opt)
	}
	var out []string
	for _, f := range front {
		out = append(out, f...)
	}
	for _, g := range groups {
		opts, err := canonicalOptions(f, g.head[1], g.opts)
		if err != nil {
			return "", fmt.Errorf("rule %q: %w", rule, err)
		}
		out = append(out, g.head...)
		for _, o := range opts {
			out = append(out, o...)
		}
	}
	return strings.Join(out, " "), nil
}

func negated(neg bool) []string {
	if neg {
		return []string{"!"}
	}
	return nil
}

// withPrefix adds the host prefix length to an address without one.
func withPrefix(v string) string {
	if strings.Contains(v, "/") {
		return v
	}
	if a, err := netip.ParseAddr(v); err == nil {
		return fmt.Sprintf("%s/%d", v, a.BitLen())
	}
	return v
}

// optionOrder is the order in which an extension prints its options.
var optionOrder = map[string][]string{
	"tcp":       {"--sport", "--dport"},
	"udp":       {"--sport", "--dport"},
	"sctp":      {"--sport", "--dport"},
	"statistic": {"--mode", "--probability"},
	"recent":    {"--set", "--rcheck", "--update", "--remove", "--seconds", "--reap", "--hitcount", "--name", "--mask", "--rsource", "--rdest"},
	"addrtype":  {"--src-type", "--dst-type"},
}

// canonicalOptions orders and rewrites the options of one match or target.
func canonicalOptions(f ipfamily.Family, name string, opts [][]string) ([][]string, error) {
	key := func(o []string) string {
		if o[0] == "!" {
			return o[1]
		}
		return o[0]
	}
	switch name {
	case "comment":
		for _, o := range opts {
			if key(o) == "--comment" && len(o) == 2 {
				o[1] = quote(unquote(o[1]))
			}
		}
	case "statistic":
		for _, o := range opts {
			if key(o) == "--probability" && len(o) == 2 {
				p, err := strconv.ParseFloat(o[1], 64)
				if err != nil {
					return nil, fmt.Errorf("statistic probability %q: %w", o[1], err)
				}
				// xt_statistic keeps the probability as a fraction of 2^31.
				o[1] = fmt.Sprintf("%.11f", float64(uint32(math.Round(p*0x80000000)))/0x80000000)
			}
		}
	case "recent":
		has := map[string]bool{}
		for _, o := range opts {
			has[key(o)] = true
		}
		if !has["--mask"] {
			mask := "255.255.255.255"
			if f == ipfamily.IPv6 {
				mask = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
			}
			opts = append(opts, []string{"--mask", mask})
		}
		if !has["--rsource"] && !has["--rdest"] {
			opts = append(opts, []string{"--rsource"})
		}
	case "MARK":
		for i, o := range opts {
			switch {
			case o[0] == "--or-mark" && len(o) == 2:
				opts[i] = []string{"--set-xmark", o[1] + "/" + o[1]}
			case o[0] == "--xor-mark" && len(o) == 2:
				opts[i] = []string{"--set-xmark", o[1] + "/0x0"}
			}
		}
	}
	if order := optionOrder[name]; order != nil {
		rank := func(o []string) int {
			for i, k := range order {
				if key(o) == k {
					return i
				}
			}
			return len(order)
		}
		sorted := make([][]string, 0, len(opts))
		for r := 0; r <= len(order); r++ {
			for _, o := range opts {
				if rank(o) == r {
					sorted = append(sorted, o)
				}
			}
		}
		opts = sorted
	}
	return opts, nil
}

func unquote(s string) string {
	if u, err := strconv.Unquote(strings.ReplaceAll(s, `\'`, `'`)); err == nil {
		return u
	}
	return s
}

// quote double-quotes a string option as iptables-save prints it
// (libxtables' xtables_save_string): ", \ and ' escaped by a backslash.
func quote(s string) string {
	return strings.ReplaceAll(strconv.Quote(s), `'`, `\'`)
}

// splitWords splits a rule into words as a shell would for
// iptables-restore: double-quoted strings (with backslash escapes) are one
// word and keep their quotes.
func splitWords(s string) ([]string, error) {
	var out []string
	for i := 0; i < len(s); {
		if s[i] == ' ' || s[i] == '\t' {
			i++
			continue
		}
		j := i
		if s[i] == '"' {
			j++
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, fmt.Errorf("rule %q: unterminated quote", s)
			}
			j++
		} else {
			for j < len(s) && s[j] != ' ' && s[j] != '\t' {
				j++
			}
		}
		out = append(out, s[i:j])
		i = j
	}
	return out, nil
}
