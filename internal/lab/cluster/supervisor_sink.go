package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/lab/topology"
)

// statusSink is where a supervisor writes what a kubelet writes: its Pod's
// status and its Node's. Each update reads the object, lets mutate change it
// (mutate reports whether it did) and writes it back when it did; an object
// that does not exist is an error wrapping errNotFound.
type statusSink interface {
	updatePod(ctx context.Context, namespace, name string, mutate func(*corev1.Pod) bool) error
	updateNode(ctx context.Context, name string, mutate func(*corev1.Node) bool) error
}

// The file control plane's objects are its manifests in objects/; a write
// publishes cluster.yaml again, atomically. The caller holds the lab's lock.

func (c *File) updatePod(ctx context.Context, namespace, name string, mutate func(*corev1.Pod) bool) error {
	p, err := c.Pod(ctx, namespace, name)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("Pod %s/%s: %w", namespace, name, ErrNotFound)
	}
	if !mutate(p) {
		return nil
	}
	return c.SetPodStatus(ctx, p)
}

func (c *File) updateNode(_ context.Context, name string, mutate func(*corev1.Node) bool) error {
	path, err := c.objectPath("Node", "", name)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("Node %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return err
	}
	var n corev1.Node
	if err := yaml.UnmarshalStrict(b, &n); err != nil {
		return fmt.Errorf("Node %s: %w", name, err)
	}
	if !mutate(&n) {
		return nil
	}
	if err := c.write(&n); err != nil {
		return err
	}
	return c.publish()
}

// kubeStatus writes status through the API server, as the kubelet does
// (retrying on a conflicting write).
type kubeStatus struct{ client kubernetes.Interface }

func (k kubeStatus) updatePod(ctx context.Context, namespace, name string, mutate func(*corev1.Pod) bool) error {
	pods := k.client.CoreV1().Pods(namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("Pod %s/%s: %w", namespace, name, ErrNotFound)
		}
		if err != nil || !mutate(p) {
			return err
		}
		_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

func (k kubeStatus) updateNode(ctx context.Context, name string, mutate func(*corev1.Node) bool) error {
	nodes := k.client.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("Node %s: %w", name, ErrNotFound)
		}
		if err != nil || !mutate(n) {
			return err
		}
		_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// nodeReady is a Node Ready condition to post.
type nodeReady struct {
	ready   bool
	message string
}

// statusWriter posts a supervisor's latest statuses in the background, under
// the lab's lock, so that they never interleave with a lab command's own
// writes (a lab command plays the kubelet when it starts a pod) or with a
// publish of the file control plane. The supervisor's restarts never wait for
// it: it keeps only the latest status of each object (a status overtaken
// before it was written is never written), waits for the lock as long as a
// lab command holds it, retries failed writes (1 s, doubling to 10 s), and
// gives up what it has not written when its context ends (lab down, a pod's
// deletion).
type statusWriter struct {
	names     topology.Names
	sink      statusSink
	namespace string // the Pod's
	pod       string
	node      string // the Node whose Ready condition is posted, or ""
	log       klog.Logger

	mu    sync.Mutex
	child *childStatus // to post, or nil
	ready *nodeReady   // to post, or nil
	kick  chan struct{}
}

func newStatusWriter(n topology.Names, sink statusSink, namespace, pod, node string, log klog.Logger) *statusWriter {
	return &statusWriter{names: n, sink: sink, namespace: namespace, pod: pod, node: node, log: log, kick: make(chan struct{}, 1)}
}

// setChild queues st as the Pod's status.
func (w *statusWriter) setChild(st childStatus) {
	w.mu.Lock()
	w.child = &st
	w.mu.Unlock()
	w.wake()
}

// setNodeReady queues the Node's Ready condition.
func (w *statusWriter) setNodeReady(ready bool, message string) {
	w.mu.Lock()
	w.ready = &nodeReady{ready, message}
	w.mu.Unlock()
	w.wake()
}

func (w *statusWriter) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Retry policy of failed status writes.
const (
	statusRetryFirst = time.Second
	statusRetryMax   = 10 * time.Second
	// lockPoll is how often a supervisor tries the lab's lock while a lab
	// command holds it.
	lockPoll = 100 * time.Millisecond
)

// run posts queued statuses until ctx ends.
func (w *statusWriter) run(ctx context.Context) {
	retryIn := time.Duration(0)
	for {
		if retryIn == 0 {
			select {
			case <-ctx.Done():
				return
			case <-w.kick:
			}
		} else if !sleepCtx(ctx, retryIn) {
			return
		}
		if err := w.flush(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			retryIn = min(max(2*retryIn, statusRetryFirst), statusRetryMax)
			w.log.Error(err, "posting status failed", "retryIn", retryIn)
			continue
		}
		retryIn = 0
	}
}

// flush writes what is queued, under the lab's lock. A queued status is
// dropped once written, or when its object is gone (a Pod being deleted).
func (w *statusWriter) flush(ctx context.Context) error {
	w.mu.Lock()
	child, ready := w.child, w.ready
	w.mu.Unlock()
	if child == nil && ready == nil {
		return nil
	}
	unlock, err := lockContext(ctx, w.names)
	if err != nil {
		return err
	}
	defer unlock()
	var errs []error
	if child != nil {
		err := w.sink.updatePod(ctx, w.namespace, w.pod, func(p *corev1.Pod) bool {
			return applyChildStatus(p, *child, time.Now())
		})
		errs = append(errs, w.done(err, func() bool { return w.child == child }, func() { w.child = nil }))
	}
	if ready != nil {
		changed := false
		err := w.sink.updateNode(ctx, w.node, func(n *corev1.Node) bool {
			changed = setNodeReady(n, ready.ready, ready.message, time.Now())
			return changed
		})
		if err == nil && changed {
			w.log.Info("posted node status", "node", w.node, "ready", ready.ready, "message", ready.message)
		}
		errs = append(errs, w.done(err, func() bool { return w.ready == ready }, func() { w.ready = nil }))
	}
	return errors.Join(errs...)
}

// done forgets a queued status when it was written (err nil) or its object
// is gone, unless a newer one was queued meanwhile (same reports that it was
// not); it returns the error worth a retry.
func (w *statusWriter) done(err error, same func() bool, forget func()) error {
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if err != nil {
		w.log.Info("not posting status: object gone", "err", err.Error())
	}
	w.mu.Lock()
	if same() {
		forget()
	}
	w.mu.Unlock()
	return nil
}

// lockContext takes the lab's lock like lock, waiting for it only until ctx
// ends.
func lockContext(ctx context.Context, n topology.Names) (func(), error) {
	f, err := openLock(n)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lab %s: lock: %w", n.Lab, err)
		}
		if !sleepCtx(ctx, lockPoll) {
			f.Close()
			return nil, ctx.Err()
		}
	}
}

// sleepCtx sleeps for d and reports true, or reports false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
