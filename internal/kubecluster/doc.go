// Package kubecluster runs a real Kubernetes control plane: etcd (Debian's
// etcd-server), kube-apiserver and, on request, kube-controller-manager and
// kube-scheduler (built from k8s.io/kubernetes by tools/k8s/build.sh). It is the
// one implementation of starting, probing and stopping them: internal/kubetest
// wraps it for one test, the lab runs it as long-lived processes inside a lab
// network namespace, and internal/nodecluster under real kubelets.
//
// Contract:
//   - Everything a cluster owns lives under Options.Dir: etcd data, credentials
//     (an admin token, a service-account key), the apiserver's serving certificate
//     and its CA, kubeconfigs, one log per component (etcd.log,
//     kube-apiserver.log, kube-controller-manager.log, kube-scheduler.log), the
//     pids of the running components (Dir/pids) and what Attach needs to
//     reconnect (Dir/cluster.json).
//   - How processes are started is the caller's: Options.Command (default
//     exec.Command; the lab passes one that runs them inside its namespace), and
//     how they are reached too: Options.Dial (readiness probes and Config).
//     kubecluster itself never enters a namespace.
//   - By default every component listens on 127.0.0.1 only, on ports picked free in
//     the caller's namespace, and is a child in its own process group that dies
//     with the caller (SIGKILL as parent-death signal). With Options.Detach each
//     runs in its own session, keeps running after the caller exits, and is found
//     again through Dir/pids by Attach or StopDir.
//   - Every wait is bounded (Options.ReadyTimeout, the caller's context, fixed
//     stop grace periods). A failed Start kills what it started and returns a
//     *StartError with the tail of the failing component's log.
//   - The apiserver serves a certificate written by Start, signed by a CA written
//     to Dir/ca.crt and into every kubeconfig; it names 127.0.0.1, localhost, the
//     advertise and bind addresses, the host of Options.ServerURL, the first
//     Service IP and the kubernetes.default names, so clients verify it whichever
//     of those they dial.
//
// There is no kubelet or kube-proxy: Pods never start here (internal/nodecluster
// adds kubelets on real nodes).
package kubecluster
