// Package describe writes what kubectl describe writes for Services, Pods
// and Nodes, byte for byte (test/kube's TestDescribeParityWithKubectl runs
// real kubectl beside it on one API server), from a cluster's API server or
// from what the embedded control plane holds (Reader).
//
// # Why not kubectl's describers
//
// k8s.io/kubectl/pkg/describe is the code kubectl runs, and was tried
// first. Linked into svcnet (v0.36.3) it grew the binary from 87.5 to
// 146.9 MB and every svcnet process's resident memory at start from 40 to
// 82 MB (`svcnet version`, /usr/bin/time's max RSS): it brings
// cli-runtime's resource builder with kustomize and its OpenAPI data, and
// kubectl's translations, all initialised in the proxy, the DNS server and
// every lab pod too. Its describers also read through a clientset, which
// for the embedded control plane would mean client-go's fake. So the three
// describers svcnet offers are written here against kubectl's output, the
// formatting helpers (tab stops, label and annotation blocks, the events
// table) included, and held to it by the parity test; with them the binary
// is 87.8 MB and `svcnet version` 41 MB. The Pod and Node unit tests'
// golden files are kubectl's own describers' output for the same fixtures
// (tools/kdesc/gen.sh writes them).
//
// # What a description shows
//
//   - Service: labels, annotations, selector, type, IP families, IPs,
//     external IPs, load-balancer ingress, each port with its target port,
//     node port and ready endpoints, affinity, traffic policies, health
//     check node port, source ranges, traffic distribution, events.
//   - Pod: node, start time, labels, annotations, status, IPs, controller,
//     containers (image, ports, command, state, readiness, restarts,
//     resources, probes, environment, mounts), conditions, volumes, QoS
//     class, node selectors, tolerations, events.
//   - Node: roles, labels, annotations, taints, lease, conditions,
//     addresses, capacity, allocatable, system info, pod CIDRs, the
//     non-terminated pods with their requests and limits, allocated
//     resources, events.
//
// Ages (an event's) are counted from the caller's now, so that output is
// deterministic in tests.
package describe
