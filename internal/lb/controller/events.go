package controller

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/eventlog"
	"github.com/svcnet/svcnet/internal/lb/plan"
	"github.com/svcnet/svcnet/internal/lb/pool"
)

// Event reasons, on the Service and on the IPAddressPool (see plan's).
const (
	ReasonIPAllocated           = plan.ReasonIPAllocated
	ReasonAllocationFailed      = plan.ReasonAllocationFailed
	ReasonIPReleased            = plan.ReasonIPReleased
	ReasonPoolAccepted          = plan.ReasonPoolAccepted
	ReasonPoolRefused           = plan.ReasonPoolRefused
	ReasonPoolReservedAddresses = plan.ReasonPoolReservedAddresses
)

// eventer records Events on Services (core/v1, through client-go's
// broadcaster, which writes them asynchronously and aggregates repeats) and
// logs each one.
type eventer struct {
	recorder record.EventRecorder
	stop     func()
	log      klog.Logger
}

// newEventer starts a broadcaster writing to client; shutdown stops it.
func newEventer(ctx context.Context, client kubernetes.Interface, log klog.Logger) *eventer {
	r, stop := eventlog.Cluster(ctx, client, corev1.EventSource{Component: Component})
	return &eventer{recorder: r, stop: stop, log: log}
}

func (e *eventer) shutdown() { e.stop() }

// allocated: svc's status now has ingress, from pool.
func (e *eventer) allocated(svc *corev1.Service, ingress []corev1.LoadBalancerIngress, pool string) {
	ips := ingressIPs(ingress)
	e.log.Info("Assigned load-balancer addresses", "service", klog.KObj(svc), "ips", strings.Join(ips, ","), "pool", pool)
	e.recorder.Event(svc, corev1.EventTypeNormal, ReasonIPAllocated, plan.AllocatedMessage(ips, pool))
}

// released: svc's status lost the addresses in old.
func (e *eventer) released(svc *corev1.Service, old []corev1.LoadBalancerIngress) {
	ips := ingressIPs(old)
	e.log.Info("Released load-balancer addresses", "service", klog.KObj(svc), "ips", strings.Join(ips, ","))
	e.recorder.Event(svc, corev1.EventTypeNormal, ReasonIPReleased, plan.ReleasedMessage(ips))
}

// failed: svc gets no (or not all its) addresses, for reason.
func (e *eventer) failed(svc *corev1.Service, reason error) {
	e.log.Info("Load-balancer addresses pending", "service", klog.KObj(svc), "reason", reason.Error())
	e.recorder.Event(svc, corev1.EventTypeWarning, ReasonAllocationFailed, reason.Error())
}

// pool: the pool's ConditionAccepted became cond.
func (e *eventer) pool(p *unstructured.Unstructured, cond metav1.Condition) {
	switch {
	case cond.Status != metav1.ConditionTrue:
		e.log.Error(nil, "IPAddressPool refused", "pool", p.GetName(), "reason", cond.Reason, "message", cond.Message)
		e.recorder.Event(p, corev1.EventTypeWarning, ReasonPoolRefused, cond.Message)
	case cond.Reason == pool.ReasonReservedAddresses:
		e.log.Error(nil, "IPAddressPool holds reserved addresses", "pool", p.GetName(), "message", cond.Message)
		e.recorder.Event(p, corev1.EventTypeWarning, ReasonPoolReservedAddresses, cond.Message)
	default:
		e.log.Info("IPAddressPool accepted", "pool", p.GetName())
		e.recorder.Event(p, corev1.EventTypeNormal, ReasonPoolAccepted, cond.Message)
	}
}
