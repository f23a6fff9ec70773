package iptables

import (
	"fmt"
	"strings"
)

// Words splits an iptables rule spec into words as iptables-restore does: a
// double-quoted string (with \" and \\ escapes) is one word.
func Words(spec string) ([]string, error) {
	var out []string
	s := strings.TrimSpace(spec)
	for s != "" {
		if s[0] == '"' {
			var b strings.Builder
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, fmt.Errorf("unterminated quote")
			}
			out = append(out, b.String())
			s = strings.TrimSpace(s[i+1:])
			continue
		}
		w, rest, _ := strings.Cut(s, " ")
		out = append(out, w)
		s = strings.TrimSpace(rest)
	}
	return out, nil
}
