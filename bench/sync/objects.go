package syncbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Objects of the benchmark: selector-less ClusterIP Services with one TCP port
// and one EndpointSlice of 2 ready endpoints each, as the reference numbers in
// docs/reference.md were measured.
const (
	servicePort  = 80
	endpointPort = 8080
	// managedBy marks the slices as made by hand (no controller runs anyway).
	managedBy = "svcnet-bench"
	// endpointNode is where the endpoints live: another node than the proxies'.
	endpointNode = "node2"
)

// ServiceName is the name of the i-th population Service.
func ServiceName(i int) string { return fmt.Sprintf("svc-%05d", i) }

// EndpointIPs returns the 2 endpoint addresses of Service number i: distinct
// for the first 32,767 Services, from the pod network 192.168.0.0/16 (never
// .0 or .255 of a /24, which some tools treat specially).
func EndpointIPs(i int) [2]netip.Addr {
	var out [2]netip.Addr
	for k := range 2 {
		n := (2*i + k) % (256 * 254)
		out[k] = netip.AddrFrom4([4]byte{192, 168, byte(n / 254), byte(n%254 + 1)})
	}
	return out
}

// NewService returns a selector-less ClusterIP Service whose ClusterIP the
// apiserver allocates.
func NewService(namespace, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: servicePort,
				TargetPort: intstr.FromInt32(endpointPort),
			}},
		},
	}
}

// NewSlice returns the EndpointSlice of Service svc: 2 ready endpoints, ips.
func NewSlice(namespace, svc string, ips [2]netip.Addr) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      svc + "-bench",
			Labels: map[string]string{
				discoveryv1.LabelServiceName: svc,
				discoveryv1.LabelManagedBy:   managedBy,
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{
			Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](endpointPort),
		}},
	}
	for _, ip := range ips {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ip.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(endpointNode),
		})
	}
	return es
}

// callTimeout bounds one API call; retries bounds the attempts per object.
const (
	callTimeout = 30 * time.Second
	retries     = 5
)

// ForEach runs fn(i) for i in [from, to) on workers goroutines and returns
// the first error (the others stop taking work). progress, when set, is
// called with the count done every step items.
func ForEach(ctx context.Context, from, to, workers, step int, progress func(done int), fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := atomic.Int64{}
	next.Store(int64(from))
	var done atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
				if d := done.Add(1); progress != nil && step > 0 && d%int64(step) == 0 {
					progress(int(d))
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// retry calls op until it succeeds, returns a non-retriable error, or the
// attempts run out. AlreadyExists and NotFound count as success (create and
// delete are then idempotent).
func retry(ctx context.Context, what string, op func(ctx context.Context) error) error {
	var err error
	for attempt := range retries {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err = op(cctx)
		cancel()
		if err == nil || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) {
			return nil
		}
		if ctx.Err() != nil || !retriable(err) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

func retriable(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsConflict(err) ||
		apierrors.IsUnexpectedServerError(err) || apierrors.IsResourceExpired(err) || isNetErr(err)
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// CreatePair creates the EndpointSlice of Service name, then the Service, and
// returns how long each took (retries included).
func CreatePair(ctx context.Context, c kubernetes.Interface, namespace, name string, ips [2]netip.Addr) (slice, svc time.Duration, err error) {
	t0 := time.Now()
	if err := CreateSlice(ctx, c, namespace, name, ips); err != nil {
		return 0, 0, err
	}
	t1 := time.Now()
	err = retry(ctx, "create service "+namespace+"/"+name, func(ctx context.Context) error {
		_, err := c.CoreV1().Services(namespace).Create(ctx, NewService(namespace, name), metav1.CreateOptions{})
		return err
	})
	return t1.Sub(t0), time.Since(t1), err
}

// CreateSlice creates the EndpointSlice of Service name.
func CreateSlice(ctx context.Context, c kubernetes.Interface, namespace, name string, ips [2]netip.Addr) error {
	return retry(ctx, "create endpointslice of "+namespace+"/"+name, func(ctx context.Context) error {
		_, err := c.DiscoveryV1().EndpointSlices(namespace).Create(ctx, NewSlice(namespace, name, ips), metav1.CreateOptions{})
		return err
	})
}

// DeletePair deletes Service name and its slice (a missing one is fine).
func DeletePair(ctx context.Context, c kubernetes.Interface, namespace, name string) error {
	if err := retry(ctx, "delete service "+namespace+"/"+name, func(ctx context.Context) error {
		return c.CoreV1().Services(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	}); err != nil {
		return err
	}
	return retry(ctx, "delete endpointslice of "+namespace+"/"+name, func(ctx context.Context) error {
		return c.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, name+"-bench", metav1.DeleteOptions{})
	})
}
