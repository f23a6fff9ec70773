package netns

import (
	"context"
	"os/exec"
	"path/filepath"
)

// CommandNetIn returns a command, killed when ctx ends, that runs argv with
// only its network namespace switched to the one named name (nsenter --net).
// Unlike CommandIn it keeps the caller's mount namespace: it reads the
// caller's /etc (no /etc/netns binds), and the namespaces it creates under
// RunDir are seen by every process (`ip netns exec` gives its command a mount
// namespace of its own, a slave of the caller's, where a namespace added
// stays private and vanishes with it). For a process that must stand in
// another network namespace as a whole, such as svcnet's own CLI in a test.
func CommandNetIn(ctx context.Context, name string, argv ...string) *exec.Cmd {
	a := NetInArgv(name, argv...)
	return exec.CommandContext(ctx, a[0], a[1:]...)
}

// NetInArgv is the command line CommandNetIn runs, for callers that start
// the process themselves (wrapped, or through another package).
func NetInArgv(name string, argv ...string) []string {
	return append([]string{"nsenter", "--net=" + filepath.Join(RunDir, name), "--"}, argv...)
}
