// Package version reports what svcnet binary this is. Version and Commit are set at
// link time by the Makefile (-X); a plain `go build` or `go run` falls back to the
// module's build information.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by -ldflags "-X github.com/svcnet/svcnet/internal/version.Version=... -X ...Commit=...".
var (
	Version = ""
	Commit  = ""
)

// Info is the binary's version, commit and Go version.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
}

// Get returns the version information, filling gaps from debug.ReadBuildInfo.
func Get() Info {
	i := Info{Version: Version, Commit: Commit, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && i.Commit == "" {
				i.Commit = s.Value
			}
		}
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}

func (i Info) String() string {
	return fmt.Sprintf("svcnet %s (commit %s, %s)", i.Version, i.Commit, i.GoVersion)
}
