// Package printers renders Kubernetes objects in kubectl get's tables: kubectl's
// columns (and -o wide extras), --show-labels, --no-headers, and KIND/NAME when
// several types are listed (internal/kubectlget prints the other -o forms). It is
// pure: objects in, text out, with the clock passed in for the AGE column.
package printers
