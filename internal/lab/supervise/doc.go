// Package supervise keeps one child process running as the kubelet keeps a
// container of a Pod with restartPolicy Always running: when the child exits
// it is started again, at once the first time and then after a back-off that
// doubles up to a cap (Backoff, the kubelet's CrashLoopBackOff), and probes
// tell whether it serves (Probe, Threshold: the kubelet's prober with its
// timeout and success and failure thresholds).
//
// Run is the restart loop; it reports every start, exit and back-off as an
// Event, from which a caller writes what the kubelet would write (container
// statuses, restart counts). The package knows nothing of Pods or of the lab.
//
// Stopping: when Run's context ends, the current child gets SIGTERM, then
// SIGKILL after Config.StopGrace, and Run returns once it has exited; no child
// is started after the context has ended. A child that exits in the same
// instant as the context ends may be restarted once before Run sees the end;
// that child is then stopped like any other before Run returns. So a
// supervisor stopped by SIGTERM leaves no child behind, whatever the order in
// which it and its child received their signals.
//
// A supervisor killed with SIGKILL leaves its child running, unsupervised, as
// a killed kubelet leaves its containers running: the child has no
// parent-death signal.
package supervise
