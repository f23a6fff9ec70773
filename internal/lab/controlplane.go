package lab

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

// ServeControlPlane runs file-mode lab name's control-plane daemon (see
// cluster.ServeControlPlane) until ctx ends; lab up starts it, supervised,
// as the Pod kube-system/svcnet-control-plane in the fabric's namespace
// (cluster.StartControlPlane), so that lab down stops it with the lab's
// other processes.
func ServeControlPlane(ctx context.Context, name string, log klog.Logger) error {
	if err := topology.ValidateName(name); err != nil {
		return err
	}
	return cluster.ServeControlPlane(ctx, topology.Names{Lab: name}, func(r *controlplane.Result, objs []controlplane.Object) []string {
		w, _ := notServed(r, objs)
		return w
	}, log)
}
