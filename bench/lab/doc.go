// Package labbench measures the embedded default's commands at scale, as a
// user meets them: `svcnet lab apply` of one Service into a file-mode lab
// (two nodes) holding N Services, `svcnet lab get svc -A`, and `svcnet get
// services -A --state` on the lab's published manifest, against kubectl
// apply and kubectl get on a real kube-apiserver (internal/kubetest)
// holding the same N Services, in the same run. `make bench-lab` runs
// TestBenchLab (gated by SVCNET_BENCH=1; without it the test skips).
//
// Each command is a new process timed from its start to its exit, as a
// shell runs it; get's maximum RSS is the kernel's (rusage). Applies run
// after the lab's proxies and DNS server have finished loading the N
// Services (their CPU time stops growing): first each once the last one's
// effects settled, as a user applying one object meets it, then as many
// back to back, each sharing the machine with the readers still loading
// the last (kube-apiserver has no such readers here). Each apply adds one
// Service with one TCP port.
//
// Knobs: SVCNET_BENCH_SIZES (default 2000,10000), SVCNET_BENCH_CHANGES
// (applies per size, default 30), SVCNET_BENCH_SVCNET (the svcnet binary),
// SVCNET_K8S_BIN (kube-apiserver and kubectl).
package labbench
