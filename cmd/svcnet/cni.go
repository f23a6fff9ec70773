package main

import (
	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/cni"
)

// personality is what the binary runs as.
type personality int

const (
	// cli: the svcnet command line.
	cli personality = iota
	// svcnetPlugin: svcnet's CNI plugin, run as a runtime runs it.
	svcnetPlugin
	// loopbackPlugin: the loopback CNI plugin (cni.Loopback).
	loopbackPlugin
)

// personalityOf says what the binary is from its argv and CNI_COMMAND. Run
// under the file name loopback (a copy or link `svcnet cni install` puts in
// the CNI bin dir), it is the loopback plugin whatever its arguments, as the
// reference plugin is. Otherwise it is svcnet's plugin when started the way a
// runtime starts one: CNI_COMMAND set and no arguments (the runtime execs
// the file named by the network's "type", svcnet, in a CNI_PATH directory).
func personalityOf(argv []string, cniCommand string) personality {
	switch {
	case len(argv) > 0 && cni.IsLoopbackName(argv[0]):
		return loopbackPlugin
	case cniCommand != "" && len(argv) == 1:
		return svcnetPlugin
	}
	return cli
}

func newCNICommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cni",
		Short: "Run as a CNI plugin (bridge, IPAM, hostPort): CNI_* environment, network configuration on stdin",
		Long: `Run svcnet's CNI plugin once, as a container runtime would: CNI_COMMAND
(ADD, DEL, CHECK, GC, STATUS, VERSION) and the other CNI_* variables in the
environment, the network configuration on stdin, the result or error on stdout.

A runtime normally runs the plugin without this subcommand: install the svcnet
binary (or a symlink to it) as "svcnet" in a CNI_PATH directory and use
"type": "svcnet" in the network configuration. See internal/cni for the
configuration fields, and "svcnet cni install" for putting the plugin on a
node.`,
		Args: cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			cni.Main() // exits non-zero itself on error
		},
	}
	cmd.AddCommand(newCNIInstallCommand(), newCNIUninstallCommand())
	return cmd
}
