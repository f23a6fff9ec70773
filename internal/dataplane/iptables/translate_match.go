package iptables

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/nft"
)

// moduleOption translates one option of the -m module in effect.
func (tr *translator) moduleOption(module, opt, v string, neg bool, p *ruleParse, rec *recent) error {
	bad := func() error {
		if module == "" {
			return fmt.Errorf("%s%s %s: not translated", bang(neg), opt, v)
		}
		return fmt.Errorf("-m %s %s%s %s: not translated", module, bang(neg), opt, v)
	}
	switch module {
	case "comment":
		if opt != "--comment" || neg {
			return bad()
		}
		p.comment = v
	case "tcp", "udp", "sctp":
		n, _ := nft.ProtoNumber(module)
		if p.proto != n || neg || (opt != "--dport" && opt != "--sport" && opt != "--destination-port" && opt != "--source-port") {
			return bad()
		}
		port, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			return bad()
		}
		fld := nft.FieldDport
		if opt == "--sport" || opt == "--source-port" {
			fld = nft.FieldSport
		}
		p.matches = append(p.matches, nft.PortMatch{Field: fld, Port: uint16(port)})
	case "addrtype":
		if v != "LOCAL" || neg || (opt != "--dst-type" && opt != "--src-type") {
			return bad()
		}
		p.matches = append(p.matches, nft.FibLocal{Saddr: opt == "--src-type"})
	case "mark":
		if opt != "--mark" {
			return bad()
		}
		val, mask, err := markValue(v)
		if err != nil {
			return fmt.Errorf("-m mark --mark %s: %w", v, err)
		}
		p.matches = append(p.matches, nft.MarkMatch{Mask: mask, Value: val & mask, Neq: neg})
	case "conntrack":
		if opt != "--ctstate" || neg {
			return bad()
		}
		var st nft.CtState
		for _, s := range strings.Split(v, ",") {
			switch s {
			case "NEW":
				st |= nft.CtNew
			case "ESTABLISHED":
				st |= nft.CtEstablished
			case "RELATED":
				st |= nft.CtRelated
			case "INVALID":
				st |= nft.CtInvalid
			default:
				return bad()
			}
		}
		p.matches = append(p.matches, nft.CtStateMatch{States: st})
	case "statistic":
		switch {
		case opt == "--mode" && v == "random" && !neg:
		case opt == "--probability" && !neg:
			n, err := oneIn(v)
			if err != nil {
				return fmt.Errorf("-m statistic --probability %s: %w", v, err)
			}
			p.matches = append(p.matches, nft.Random{Mod: n, Value: 0})
		default:
			return bad()
		}
	case "recent":
		return rec.option(opt, v, neg, tr.fam)
	default:
		return bad()
	}
	return nil
}

// recent is one -m recent match being read.
type recent struct {
	name       string
	set, check bool
	seconds    time.Duration
}

var (
	fullMask4 = "255.255.255.255"
	fullMask6 = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
)

func (r *recent) option(opt, v string, neg bool, f ipfamily.Family) error {
	if neg {
		return fmt.Errorf("-m recent ! %s: not translated", opt)
	}
	switch opt {
	case "--name":
		r.name = v
	case "--set":
		r.set = true
	case "--rcheck":
		r.check = true
	case "--seconds":
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			return fmt.Errorf("-m recent --seconds %s: want a positive number", v)
		}
		r.seconds = time.Duration(n) * time.Second
	case "--reap", "--rsource":
		// --rsource is the default (the source address is recorded).
	case "--mask":
		if (f == ipfamily.IPv4 && v != fullMask4) || (f == ipfamily.IPv6 && v != fullMask6) {
			return fmt.Errorf("-m recent --mask %s: only the full mask is translated", v)
		}
	default:
		return fmt.Errorf("-m recent %s: not translated", opt)
	}
	return nil
}

// recentDone closes a -m recent match: --set is an update of the list's
// set, --rcheck a lookup in it (entries expire after --seconds).
func (tr *translator) recentDone(r *recent, p *ruleParse) error {
	if r.name == "" {
		r.name = "DEFAULT"
	}
	switch {
	case r.set == r.check:
		return fmt.Errorf("-m recent: want exactly one of --set and --rcheck")
	case r.set:
		p.matches = append(p.matches, nft.Update{Set: r.name, Fields: []nft.Field{nft.FieldSaddr}})
		if _, ok := tr.timeouts[r.name]; !ok {
			tr.timeouts[r.name] = 0
		}
	default:
		if r.seconds == 0 {
			return fmt.Errorf("-m recent --rcheck without --seconds: not translated")
		}
		p.matches = append(p.matches, nft.Lookup{Set: r.name, Fields: []nft.Field{nft.FieldSaddr}})
		tr.timeouts[r.name] = max(tr.timeouts[r.name], r.seconds)
	}
	return nil
}

// addrPrefix parses ADDR or ADDR/LEN of family f.
func addrPrefix(f ipfamily.Family, s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, err
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return p, err
		}
		p = nft.Host(a)
	}
	if ipfamily.Of(p.Addr()) != f {
		return p, fmt.Errorf("not an address of family %s", f)
	}
	return p.Masked(), nil
}

// markValue parses V or V/M (hexadecimal with 0x, or decimal); the mask
// defaults to all bits.
func markValue(s string) (val, mask uint32, err error) {
	v, m, hasMask := strings.Cut(s, "/")
	parse := func(x string) (uint32, error) {
		n, err := strconv.ParseUint(x, 0, 32)
		return uint32(n), err
	}
	if val, err = parse(v); err != nil {
		return 0, 0, fmt.Errorf("bad mark value")
	}
	mask = math.MaxUint32
	if hasMask {
		if mask, err = parse(m); err != nil {
			return 0, 0, fmt.Errorf("bad mark mask")
		}
	}
	return val, mask, nil
}

// kernelScale is the statistic match's precision: the kernel keeps the
// probability as a 31-bit fraction (xt_statistic: random < probability).
const kernelScale = 1 << 31

// oneIn returns n when p is 1/n to the kernel's precision.
func oneIn(s string) (uint32, error) {
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || p <= 0 || p > 1 {
		return 0, fmt.Errorf("want a probability in (0, 1]")
	}
	n := math.Round(1 / p)
	if n < 1 || n > math.MaxUint32 || math.Abs(p-1/n) > 1.0/kernelScale {
		return 0, fmt.Errorf("not 1/n for a whole n: the simulator weighs only such branches")
	}
	return uint32(n), nil
}
