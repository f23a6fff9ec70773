package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/version"
)

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print svcnet's version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := version.Get()
			switch output {
			case "":
				fmt.Fprintln(cmd.OutOrStdout(), v)
			case "json":
				b, _ := json.MarshalIndent(v, "", "  ")
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
			default:
				return fmt.Errorf("version: unknown output format %q (want json)", output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json")
	return cmd
}
