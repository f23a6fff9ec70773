// Command svcnet is Kubernetes Service networking in one binary. Each subcommand
// parses its flags and wires packages together; the work is done in internal/.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/cni"
)

func main() {
	switch personalityOf(os.Args, os.Getenv("CNI_COMMAND")) {
	case loopbackPlugin:
		cni.LoopbackMain()
		return
	case svcnetPlugin:
		cni.Main()
		return
	}
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "svcnet:", err)
		os.Exit(exitCode(err))
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "svcnet",
		Short:         "Kubernetes Service networking in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand(), newGetCommand(), newDescribeCommand(), newProxyCommand(), newCNICommand())
	root.AddCommand(newEchoCommand())
	root.AddCommand(newLabCommand(), newDemoCommand(), newTraceCommand())
	root.AddCommand(newLBCommand())
	root.AddCommand(newDNSCommand(), newResolveCommand())
	return root
}

// exitError carries an exit status for errors that have already been reported.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	if e, ok := err.(*exitError); ok {
		return e.code
	}
	return 1
}
