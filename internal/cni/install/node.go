package install

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// ErrNoPodCIDR is returned (wrapped) when the Node has no pod CIDR yet.
var ErrNoPodCIDR = errors.New("no pod CIDR")

// ValidateNodeName checks a Node name as the apiserver does (a DNS-1123
// subdomain).
func ValidateNodeName(name string) error {
	if name == "" {
		return errors.New("no node name: give --node-name or set NODE_NAME (the downward API's spec.nodeName)")
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("node name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// PodCIDRs returns the pod CIDRs of node: spec.podCIDRs, or spec.podCIDR
// alone when podCIDRs is empty. Each must be a CIDR in canonical form (the
// network address), at most one per family, and podCIDR, when set, must be
// podCIDRs[0], as the apiserver's validation demands; a violation is an error
// naming the Node, the field and the reason. No CIDR at all wraps
// ErrNoPodCIDR.
func PodCIDRs(node *corev1.Node) ([]netip.Prefix, error) {
	field, cidrs := "spec.podCIDRs", node.Spec.PodCIDRs
	if len(cidrs) == 0 && node.Spec.PodCIDR != "" {
		field, cidrs = "spec.podCIDR", []string{node.Spec.PodCIDR}
	}
	if len(cidrs) == 0 {
		return nil, fmt.Errorf("node %s: %w (spec.podCIDRs is empty)", node.Name, ErrNoPodCIDR)
	}
	if len(cidrs) > 2 {
		return nil, fmt.Errorf("node %s: %s %q: at most two (one IPv4, one IPv6)", node.Name, field, cidrs)
	}
	if node.Spec.PodCIDR != "" && node.Spec.PodCIDR != cidrs[0] {
		return nil, fmt.Errorf("node %s: spec.podCIDR %q is not spec.podCIDRs[0] %q", node.Name, node.Spec.PodCIDR, cidrs[0])
	}
	var out []netip.Prefix
	for i, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("node %s: %s[%d] %q: not a CIDR", node.Name, field, i, s)
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("node %s: %s[%d] %q: not a network address (%s)", node.Name, field, i, s, p.Masked())
		}
		if p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return nil, fmt.Errorf("node %s: %s[%d] %q: want a plain IPv4 or IPv6 network", node.Name, field, i, s)
		}
		if i == 1 && p.Addr().Is4() == out[0].Addr().Is4() {
			return nil, fmt.Errorf("node %s: %s %q: two of one family; want one IPv4 and one IPv6", node.Name, field, cidrs)
		}
		out = append(out, p)
	}
	return out, nil
}

// WaitForPodCIDRs gets the Node name every interval until it has pod CIDRs,
// for at most timeout, as flannel waits for its node's podCIDR: the Node may
// not have one yet when the node is new (kube-controller-manager's node-ipam
// assigns it). A Node whose CIDRs are invalid is an error at once; failing
// API calls are retried until the timeout, which then reports the last of
// them.
func WaitForPodCIDRs(ctx context.Context, c kubernetes.Interface, name string, timeout, interval time.Duration) (*corev1.Node, []netip.Prefix, error) {
	var (
		node    *corev1.Node
		cidrs   []netip.Prefix
		lastErr error
	)
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			lastErr = fmt.Errorf("node %s: %w", name, err)
			return false, nil
		}
		cidrs, err = PodCIDRs(n)
		if errors.Is(err, ErrNoPodCIDR) {
			lastErr = err
			return false, nil
		}
		if err != nil {
			return false, err
		}
		node = n
		return true, nil
	})
	switch {
	case err == nil:
		return node, cidrs, nil
	case ctx.Err() != nil:
		return nil, nil, fmt.Errorf("node %s: %w", name, ctx.Err())
	case wait.Interrupted(err) && errors.Is(lastErr, ErrNoPodCIDR):
		return nil, nil, fmt.Errorf("%w after waiting %v: is kube-controller-manager's --allocate-node-cidrs on, or does something else assign pod CIDRs?", lastErr, timeout)
	case wait.Interrupted(err) && lastErr != nil:
		return nil, nil, fmt.Errorf("%w (gave up after %v)", lastErr, timeout)
	}
	return nil, nil, err
}
