package install

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/cni"
)

// NodeConfList is the conflist of one Node: svcnet's network (cni.ConfList)
// with the Node's pod CIDRs, both families on a dual-stack Node, in the
// cniVersion versionFlag chooses for the Node's container runtime
// (ChooseCNIVersion). It returns the version and why it was chosen. The
// plugin's other fields keep their defaults (bridge cni0, the MTU of the
// node's default route, the IPAM store under /var/lib/cni/networks).
func NodeConfList(node *corev1.Node, versionFlag string) (conflist []byte, version, reason string, err error) {
	cidrs, err := PodCIDRs(node)
	if err != nil {
		return nil, "", "", err
	}
	version, reason, err = ChooseCNIVersion(versionFlag, node.Status.NodeInfo.ContainerRuntimeVersion)
	if err != nil {
		return nil, "", "", err
	}
	conflist, err = cni.ConfList(cni.ListOptions{CNIVersion: version, Subnets: cidrs})
	if err != nil {
		return nil, "", "", err
	}
	return conflist, version, reason, nil
}
