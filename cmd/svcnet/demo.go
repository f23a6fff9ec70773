package main

import (
	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/lab/demo"
)

// newDemoCommand is `svcnet demo` (what `make demo` runs): the scenario of the article
// "Demystifying Kubernetes Services Packet Path" on a lab.
func newDemoCommand() *cobra.Command {
	o := demo.Options{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "The article \"Demystifying Kubernetes Services Packet Path\" on a 3-node lab: a LoadBalancer Service through ClusterIP and NodePort, externalTrafficPolicy Cluster then Local",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(cmd)
			defer cancel()
			o.Out = cmd.OutOrStdout()
			return demo.Run(ctx, o)
		},
	}
	cmd.Flags().StringVarP(&o.Manifests, "filename", "f", "examples/packet-path/my-nginx.yaml", "the article's Service and pods")
	cmd.Flags().StringVar(&o.Name, "name", "demo", "the lab's name")
	cmd.Flags().StringVar(&o.SVG, "svg", "svcnet-demo-trace.svg", "where to write the diagram of the closing trace (empty: none)")
	addDataPlaneFlag(cmd, &o.DataPlane)
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "leave the lab up at the end (remove it with svcnet lab down --name NAME)")
	return cmd
}
