// Package kubetest starts a real Kubernetes control plane for one test: etcd
// (Debian's etcd-server), kube-apiserver and, on request, kube-controller-manager,
// built from k8s.io/kubernetes by tools/k8s/build.sh. It is a normal package meant to
// be imported by the _test.go files of other packages (the "kube" test tier).
// Starting, probing and stopping the processes is internal/kubecluster's; this
// package adds what is about tests: the tier's skip rules, finding or building the
// binaries, t.TempDir, t.Cleanup, logs in the test log, and object helpers.
//
// Contract:
//   - Every process listens on 127.0.0.1 only, on ports picked free at start; nothing
//     is created in the host's network namespace beyond loopback sockets.
//   - Every process runs in its own process group and is killed (SIGTERM, then
//     SIGKILL) by t.Cleanup, also when the test fails or calls t.Fatal; its data and
//     logs live under t.TempDir and are removed with it. On failure the tail of each
//     process's log is written to the test log.
//   - Every wait is bounded in time; a timeout fails the test naming what was awaited
//     and showing the logs.
//   - Skip rules (docs/design.md, test tiers): only when SVCNET_REQUIRE_ROOT is unset,
//     and then with -short or when not root, is the test skipped, with the reason.
//     Otherwise any missing prerequisite (no etcd, failed build) fails the test.
//
// There is no kubelet: Pods never start. Use SetPodStatus to make a Pod look running
// and ready, and CreateNode for Nodes with addresses, podCIDRs and a Ready condition.
package kubetest
