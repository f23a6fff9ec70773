package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/dataplane/planes"
	"github.com/svcnet/svcnet/internal/proxy"
	"github.com/svcnet/svcnet/internal/trace"
)

// egressOptions are the egress masquerade flags of svcnet proxy, which
// svcnet trace mirrors for the rulesets it renders.
//
// On by default, as kindnet's --masquerading and the bridge plugin's ipMasq
// in the conflists that ship with it: a pod's address is seldom routable
// outside the cluster, so without it pods reach nothing outside. It applies
// to each family with a --cluster-cidr: that is what tells a pod's traffic,
// and pod-to-pod traffic, from the rest. Unlike ip-masq-agent, the
// non-masquerade CIDRs are empty by default (ip-masq-agent leaves all of RFC
// 1918 alone, so a pod could not reach a 10/8 or 172.16/12 network outside
// the cluster without a configuration); link-local is left alone by default,
// as in ip-masq-agent.
type egressOptions struct {
	enabled   bool
	cidrs     []string
	linkLocal bool
	// cidrsFrom names where cidrs came from, for errors: the flag, or the
	// --config file's field.
	cidrsFrom string
	// fileEnabled is set when the --config file turns it on.
	fileEnabled bool
}

// Egress masquerade flag names.
const (
	flagEgressMasquerade    = "egress-masquerade"
	flagNonMasqueradeCIDRs  = "non-masquerade-cidrs"
	flagMasqueradeLinkLocal = "masquerade-link-local"
)

func (e *egressOptions) bind(fs *pflag.FlagSet) {
	fs.BoolVar(&e.enabled, flagEgressMasquerade, true, "masquerade pod traffic leaving the cluster to the node's address (as ip-masq-agent): from a --cluster-cidr address to anywhere outside the cluster CIDRs, the Service CIDRs (--service-cluster-ip-range, where given), --non-masquerade-cidrs and link-local; for each family with a --cluster-cidr")
	fs.StringSliceVar(&e.cidrs, flagNonMasqueradeCIDRs, nil, "CIDRs that pod traffic reaches with its own address, besides the cluster and Service CIDRs (ip-masq-agent's nonMasqueradeCIDRs), e.g. a network that routes the pod CIDRs back")
	fs.BoolVar(&e.linkLocal, flagMasqueradeLinkLocal, false, "masquerade pod traffic to link-local addresses (169.254.0.0/16, fe80::/10) too (ip-masq-agent's masqLinkLocal)")
}

// nonMasqueradeCIDRs parses the non-masquerade CIDRs; an error names the
// flag or the --config field they came from and the bad value.
func (e *egressOptions) nonMasqueradeCIDRs() ([]netip.Prefix, error) {
	from := e.cidrsFrom
	if from == "" {
		from = "--" + flagNonMasqueradeCIDRs
	}
	return parseCIDRs(from, e.cidrs)
}

// parseCIDRs parses a list of CIDRs strictly (proxy.ValidCIDR); an error
// names what, the index (when more than one) and the value.
func parseCIDRs(what string, list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for i, s := range list {
		name := what
		if len(list) > 1 {
			name = fmt.Sprintf("%s[%d]", what, i)
		}
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%s %q: not a CIDR (want ADDRESS/BITS, e.g. 10.0.0.0/8)", name, s)
		}
		if err := proxy.ValidCIDR(p); err != nil {
			return nil, fmt.Errorf("%s %q: %w", name, s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// egressConf is svcnet's own section of the --config file, not a field of
// KubeProxyConfiguration (kube-proxy, given this file, warns that it does
// not know it and goes on):
//
//	egressMasquerade:
//	  enabled: true
//	  nonMasqueradeCIDRs: [10.0.0.0/8]
//	  masqLinkLocal: false
//
// The field names are ip-masq-agent's, whose configuration this mirrors.
type egressConf struct {
	Enabled            *bool    `json:"enabled"`
	NonMasqueradeCIDRs []string `json:"nonMasqueradeCIDRs"`
	MasqLinkLocal      *bool    `json:"masqLinkLocal"`
}

// The section's name and field paths.
const (
	egressSection      = "egressMasquerade"
	fieldEgressEnabled = egressSection + ".enabled"
	fieldNonMasq       = egressSection + ".nonMasqueradeCIDRs"
	fieldMasqLinkLocal = egressSection + ".masqLinkLocal"
)

// validate checks the section's CIDRs, naming the file and the field.
func (c egressConf) validate(file string) error {
	_, err := parseCIDRs(fmt.Sprintf("--config %s: %s", file, fieldNonMasq), c.NonMasqueradeCIDRs)
	return err
}

// applyTo copies the section into e, except for flags set on the command
// line.
func (c egressConf) applyTo(e *egressOptions, file string, set func(...string) bool) {
	if c.Enabled != nil && !set(flagEgressMasquerade) {
		e.enabled, e.fileEnabled = *c.Enabled, *c.Enabled
	}
	if c.NonMasqueradeCIDRs != nil && !set(flagNonMasqueradeCIDRs) {
		e.cidrs = c.NonMasqueradeCIDRs
		e.cidrsFrom = fmt.Sprintf("--config %s: %s", file, fieldNonMasq)
	}
	if c.MasqLinkLocal != nil && !set(flagMasqueradeLinkLocal) {
		e.linkLocal = *c.MasqLinkLocal
	}
}

// egressFields are the section's entries of the --config field table.
var egressFields = []configField{
	{path: fieldEgressEnabled, svcnet: true},
	{path: fieldNonMasq, svcnet: true},
	{path: fieldMasqLinkLocal, svcnet: true},
}

// egressConfig fills cfg's egress masquerade settings from the options;
// serviceCIDRs are the cluster's Service networks where svcnet knows them.
func (o *proxyOptions) egressConfig(cfg *proxy.Config, serviceCIDRs []netip.Prefix) error {
	cidrs, err := o.egress.nonMasqueradeCIDRs()
	if err != nil {
		return err
	}
	cfg.EgressMasquerade = o.egress.enabled
	cfg.NonMasqueradeCIDRs = cidrs
	cfg.MasqueradeLinkLocal = o.egress.linkLocal
	cfg.ServiceCIDRs = serviceCIDRs
	return nil
}

// egressWarnings names the egress masquerade settings that do nothing as
// configured.
func (o *proxyOptions) egressWarnings(fs *pflag.FlagSet, cfg proxy.Config) []string {
	var out []string
	switch {
	case o.dataPlane == planes.None:
		if cfg.EgressMasquerade && (fs.Changed(flagEgressMasquerade) || o.egress.fileEnabled) {
			out = append(out, fmt.Sprintf("--%s (%s): not applied: with --data-plane none svcnet programs no nftables table; the Service proxy or CNI plugin beside svcnet masquerades pod traffic, if anything does", flagEgressMasquerade, egressSection))
		}
	case !cfg.EgressMasquerade:
		if len(o.egress.cidrs) > 0 {
			out = append(out, fmt.Sprintf("--%s (%s) %q: not used: egress masquerade is off", flagNonMasqueradeCIDRs, fieldNonMasq, strings.Join(o.egress.cidrs, ",")))
		}
		if o.egress.linkLocal {
			out = append(out, fmt.Sprintf("--%s (%s): not used: egress masquerade is off", flagMasqueradeLinkLocal, fieldMasqLinkLocal))
		}
	}
	return out
}

// egressSummary describes the egress masquerade in effect for the start
// log line: per family, the pod CIDR masqueraded from, or why none is (a
// family without a --cluster-cidr has no traffic known to be a pod's).
func egressSummary(cfg proxy.Config) []string {
	e := cfg.Egress()
	var out []string
	for _, fam := range []struct {
		name string
		v6   bool
	}{{"IPv4", false}, {"IPv6", true}} {
		s := fam.name + " off"
		if cfg.EgressMasquerade {
			s += ": no --cluster-cidr of the family"
		}
		for _, p := range e.PodCIDRs {
			if p.Addr().Is6() == fam.v6 {
				s = fam.name + " from " + p.String()
			}
		}
		out = append(out, s)
	}
	return out
}

// traceOptions sets the egress masquerade of svcnet trace's rendered
// rulesets: svcnet proxy's, as these flags describe it, with the Service
// CIDRs where svcnet knows them (--state, or the flag given).
func (e *egressOptions) traceOptions(opts *trace.Options, src stateFlags, fs *pflag.FlagSet) error {
	cidrs, err := e.nonMasqueradeCIDRs()
	if err != nil {
		return err
	}
	opts.EgressOff = !e.enabled
	opts.Egress.NonMasqueradeCIDRs = cidrs
	opts.Egress.MasqueradeLinkLocal = e.linkLocal
	opts.Egress.ServiceCIDRs, err = src.knownServiceCIDRs(fs)
	return err
}

// knownServiceCIDRs returns the cluster's Service networks where svcnet
// knows them: with --state, the range the embedded control plane allocates
// from; otherwise --service-cluster-ip-range only when given (the API
// server's own flag is not visible to a node agent).
func (f *stateFlags) knownServiceCIDRs(fs *pflag.FlagSet) ([]netip.Prefix, error) {
	if f.state == "" && !fs.Changed("service-cluster-ip-range") {
		return nil, nil
	}
	out, err := parseCIDRList(f.serviceCIDRs)
	if err != nil {
		return nil, fmt.Errorf("--service-cluster-ip-range %q: %w", f.serviceCIDRs, err)
	}
	return out, nil
}
