package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/lab"
)

// labSocketsCommand is `svcnet lab sockets`, hidden: the socket source a lab
// command starts in a node's namespace and cgroup for its dials from there
// (lab.ServeSockets). It answers on descriptor 3 and exits when the command
// closes its end.
func labSocketsCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "sockets",
		Short:  "Make sockets for a lab command's dials from this namespace and cgroup, over descriptor 3 (started by the lab)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := os.NewFile(3, "sockets")
			if f == nil {
				return errors.New("sockets: no descriptor 3")
			}
			defer f.Close()
			return lab.ServeSockets(f)
		},
	}
}
