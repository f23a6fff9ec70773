package cluster

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	lbdeploy "github.com/svcnet/svcnet/deploy/lb"
	"github.com/svcnet/svcnet/internal/kubecluster"
	"github.com/svcnet/svcnet/internal/lb/pool"
	"github.com/svcnet/svcnet/internal/netns"
)

var poolResource = pool.SchemeGroupVersion.WithResource(pool.Resource)

// InstallLB installs what svcnet lb needs in the kube control plane: the
// IPAddressPool CRD (waited for until Established, bounded by 30 s) and the
// controller, `svcnet lb controller`, running supervised in the control
// plane's namespace as the Pod kube-system/svcnet-lb-controller, as its
// Deployment would (startLBController).
func (c *Cluster) InstallLB(ctx context.Context, k *Kube) error {
	dyn, err := dynamic.NewForConfig(k.c.Config)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	if _, err := kubecluster.InstallCRD(ctx, dyn, lbdeploy.CRD, 30*time.Second); err != nil {
		return err
	}
	cp, err := netns.Open(c.Names.Control())
	if err != nil {
		return err
	}
	defer cp.Close()
	return c.startLBController(ctx, cp, lbControllerArgv(c.Info, k.c.Kubeconfig))
}

// applyPool creates or updates an IPAddressPool through the dynamic client.
func (k *Kube) applyPool(ctx context.Context, p *pool.IPAddressPool) error {
	dyn, err := dynamic.NewForConfig(k.c.Config)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(pool.SchemeGroupVersion.String())
	u.SetKind(pool.Kind)
	r := dyn.Resource(poolResource)
	_, err = r.Create(ctx, u, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var old *unstructured.Unstructured
		if old, err = r.Get(ctx, p.Name, metav1.GetOptions{}); err == nil {
			u.SetResourceVersion(old.GetResourceVersion())
			_, err = r.Update(ctx, u, metav1.UpdateOptions{})
		}
	}
	return err
}
