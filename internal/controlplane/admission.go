package controlplane

import corev1 "k8s.io/api/core/v1"

// topologyLabels are the Node labels kube-apiserver's PodTopologyLabels admission
// plugin (on by default in v1.36) copies onto a Pod bound to that Node.
var topologyLabels = []string{"topology.kubernetes.io/zone", "topology.kubernetes.io/region"}

// admitPodTopology does what PodTopologyLabels does for a Pod created with
// spec.nodeName: it copies the Node's topology labels onto the Pod, overwriting
// the Pod's own. A Pod whose Node is unknown is left as it is, as upstream.
func admitPodTopology(pods []*corev1.Pod, nodes []*corev1.Node) {
	byName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	for _, p := range pods {
		n := byName[p.Spec.NodeName]
		if n == nil {
			continue
		}
		for _, k := range topologyLabels {
			v, ok := n.Labels[k]
			if !ok {
				continue
			}
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels[k] = v
		}
	}
}
