package controlplane

import (
	corev1 "k8s.io/api/core/v1"
)

// podIndex finds the Pods a selector matches without looking at every Pod: Pods
// are indexed by namespace and by each "key=value" label, and a selector starts
// from its rarest pair.
type podIndex map[string]map[string][]*corev1.Pod

// newPodIndex indexes pods, which must be sorted; lists keep that order.
func newPodIndex(pods []*corev1.Pod) podIndex {
	idx := podIndex{}
	for _, p := range pods {
		byLabel := idx[p.Namespace]
		if byLabel == nil {
			byLabel = map[string][]*corev1.Pod{}
			idx[p.Namespace] = byLabel
		}
		for k, v := range p.Labels {
			byLabel[k+"="+v] = append(byLabel[k+"="+v], p)
		}
	}
	return idx
}

// selectPods returns the Pods of namespace ns that carry every label of selector,
// in index order. An empty selector selects nothing (the caller treats a Service
// without selector separately).
func (idx podIndex) selectPods(ns string, selector map[string]string) []*corev1.Pod {
	byLabel := idx[ns]
	if len(selector) == 0 || byLabel == nil {
		return nil
	}
	var candidates []*corev1.Pod
	first := true
	for _, k := range sortedKeys(selector) {
		list := byLabel[k+"="+selector[k]]
		if first || len(list) < len(candidates) {
			candidates, first = list, false
		}
	}
	var out []*corev1.Pod
	for _, p := range candidates {
		if matches(selector, p.Labels) {
			out = append(out, p)
		}
	}
	return out
}

func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
