package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/cni"
)

// runningAsCNIPlugin reports whether the binary was started the way a
// container runtime starts a CNI plugin: CNI_COMMAND set and no arguments
// (the runtime execs the file named by the network's "type", e.g. a symlink
// named svcnet in a CNI_PATH directory).
func runningAsCNIPlugin() bool {
	return os.Getenv("CNI_COMMAND") != "" && len(os.Args) == 1
}

func newCNICommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cni",
		Short: "Run as a CNI plugin (bridge, IPAM, hostPort): CNI_* environment, network configuration on stdin",
		Long: `Run svcnet's CNI plugin once, as a container runtime would: CNI_COMMAND
(ADD, DEL, CHECK, GC, STATUS, VERSION) and the other CNI_* variables in the
environment, the network configuration on stdin, the result or error on stdout.

A runtime normally runs the plugin without this subcommand: install the svcnet
binary (or a symlink to it) as "svcnet" in a CNI_PATH directory and use
"type": "svcnet" in the network configuration. See internal/cni for the
configuration fields.`,
		Args: cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			cni.Main() // exits non-zero itself on error
		},
	}
}
