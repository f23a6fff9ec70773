package main

import (
	"errors"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/cluster"
)

// labSuperviseCommand is `svcnet lab supervise`, hidden: the supervisor the
// lab starts for each of its processes (cluster.Supervise). SIGTERM stops it and
// its child.
func labSuperviseCommand(name *string) *cobra.Command {
	o := cluster.SuperviseOptions{}
	cmd := &cobra.Command{
		Use:    "supervise --pod NAMESPACE/NAME [flags] -- COMMAND [ARG...]",
		Short:  "Run COMMAND as Pod NAMESPACE/NAME's containers and restart it when it exits, as a kubelet does (started by the lab)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 {
				return errors.New("supervise: want -- before the command")
			}
			ctx, cancel := signalContext(cmd)
			defer cancel()
			o.Lab, o.Argv = *name, args
			return cluster.Supervise(ctx, o, klog.Background().WithName("supervise"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Pod, "pod", "", "NAMESPACE/NAME of the Pod whose status reports the command")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kube control plane: post statuses through this kubeconfig (default: the lab's file control plane)")
	f.StringArrayVar(&o.Readiness, "readiness", nil, "readiness probe, http://HOST:PORT/PATH or tcp://HOST:PORT (repeatable)")
	f.StringVar(&o.Node, "node", "", "post this Node's Ready condition from the readiness probes")
	f.StringVar(&o.StateFile, "state-file", "", "keep the command's pid and its start and exit counts in this file (JSON), for lab commands")
	return cmd
}

// labControlPlaneCommand is `svcnet lab control-plane`, hidden: a file-mode
// lab's control-plane daemon (lab.ServeControlPlane). SIGTERM stops it.
func labControlPlaneCommand(name *string) *cobra.Command {
	return &cobra.Command{
		Use:    "control-plane",
		Short:  "Serve a file-mode lab's embedded control plane to lab commands until interrupted (started by lab up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(cmd)
			defer cancel()
			return lab.ServeControlPlane(ctx, *name, klog.Background().WithName("control-plane"))
		},
	}
}
