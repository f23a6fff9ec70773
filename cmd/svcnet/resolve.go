package main

import (
	"fmt"
	"net/netip"
	"strings"

	miekgdns "github.com/miekg/dns"
	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/dns"
	"github.com/svcnet/svcnet/internal/dns/resolv"
)

// resolveOptions are `svcnet resolve`'s flags.
type resolveOptions struct {
	qtype      string
	server     string
	resolvConf string
}

func newResolveCommand() *cobra.Command {
	o := &resolveOptions{}
	cmd := &cobra.Command{
		Use:   "resolve NAME",
		Short: "Look a name up as a pod's resolver would (a small dig)",
		Long: `svcnet resolve looks NAME up the way glibc does: it reads /etc/resolv.conf
(nameserver, search, ndots), tries NAME with the search domains first when it
has fewer than ndots dots (else as is first), and retries over TCP when an
answer is truncated. It prints the records of the first answer, one per line,
as "dig +short" does, and exits 1 naming every name tried when none has one.
With -t PTR, NAME may be an IP address.`,
		Example: `  svcnet resolve my-nginx
  svcnet resolve -t SRV _http._tcp.my-nginx.default.svc.cluster.local
  svcnet resolve -t PTR 10.96.0.10 --server 10.96.0.10`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.qtype, "type", "t", "A", "record type: A, AAAA, SRV, PTR, TXT, CNAME, ...")
	fs.StringVar(&o.server, "server", "", "ask this name server (IP or IP:port) instead of resolv.conf's")
	fs.StringVar(&o.resolvConf, "resolv-conf", resolv.DefaultPath, "resolver configuration file")
	_ = fs.MarkHidden("resolv-conf")
	return cmd
}

func (o *resolveOptions) run(cmd *cobra.Command, name string) error {
	qtype, ok := miekgdns.StringToType[strings.ToUpper(o.qtype)]
	if !ok {
		return fmt.Errorf("-t %q: unknown record type", o.qtype)
	}
	if a, err := netip.ParseAddr(name); err == nil && qtype == miekgdns.TypePTR {
		if name, err = miekgdns.ReverseAddr(a.String()); err != nil {
			return fmt.Errorf("reverse name of %s: %w", a, err)
		}
	}
	cfg, err := resolv.ReadConfig(o.resolvConf)
	if err != nil {
		return err
	}
	if o.server != "" {
		srv, err := dns.ParseServerAddr(o.server)
		if err != nil {
			return fmt.Errorf("--server: %w", err)
		}
		cfg.Nameservers = []string{srv}
	}
	ctx, cancel := signalContext(cmd)
	defer cancel()
	r, err := cfg.Lookup(ctx, name, qtype)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	for _, rr := range r.Answer {
		fmt.Fprintln(out, resolv.RData(rr))
	}
	return nil
}
