package install

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// CNI versions the installer writes.
const (
	// CNIVersion100 is what every runtime since libcni v1.0 parses: results
	// of a newer version fail there ("unsupported CNI result version").
	CNIVersion100 = "1.0.0"
	// CNIVersion110 adds GC and STATUS; libcni v1.2 and later parse it.
	CNIVersion110 = "1.1.0"
	// VersionAuto picks one of them from the Node's container runtime.
	VersionAuto = "auto"
)

// versionChoices are the values of --cni-version.
var versionChoices = []string{VersionAuto, CNIVersion100, CNIVersion110}

// runtimeVersion is "<name>://<version>" as the kubelet reports it in
// status.nodeInfo.containerRuntimeVersion; the version may start with "v"
// and carry a distribution's suffix ("1.6.20~ds1", "1.7.7-k3s1").
var runtimeVersion = regexp.MustCompile(`^([a-z0-9.-]+)://v?([0-9]+)\.([0-9]+)`)

// ChooseCNIVersion returns the cniVersion to write for flag (auto, 1.0.0 or
// 1.1.0) on a Node whose runtime is runtime, and why. auto follows the CNI
// library each runtime parses results with:
//
//   - containerd 2.0 and later: go-cni on libcni v1.2 (1.1.0, GC, STATUS);
//   - containerd 1.x: libcni v1.1 (1.6 and 1.7), results up to 1.0.0;
//   - CRI-O 1.31 and later: ocicni on libcni v1.2.3; earlier CRI-O: 1.0.0;
//   - any other runtime, or none reported yet: 1.0.0, which all of them
//     parse (the plugin speaks both; 1.0.0 only lacks GC and STATUS).
func ChooseCNIVersion(flag, runtime string) (version, reason string, err error) {
	switch flag {
	case CNIVersion100, CNIVersion110:
		return flag, "--cni-version " + flag, nil
	case VersionAuto, "":
	default:
		return "", "", fmt.Errorf("--cni-version %q: want one of %s", flag, strings.Join(versionChoices, ", "))
	}
	m := runtimeVersion.FindStringSubmatch(runtime)
	if m == nil {
		return CNIVersion100, fmt.Sprintf("container runtime %q not recognised: %s is parsed by every runtime", runtime, CNIVersion100), nil
	}
	name := m[1]
	major, err1 := strconv.Atoi(m[2])
	minor, err2 := strconv.Atoi(m[3])
	if err1 != nil || err2 != nil {
		return CNIVersion100, fmt.Sprintf("container runtime %q: version not understood: %s", runtime, CNIVersion100), nil
	}
	switch {
	case name == "containerd" && major >= 2:
		return CNIVersion110, fmt.Sprintf("containerd %d.%d parses CNI %s results", major, minor, CNIVersion110), nil
	case name == "containerd":
		return CNIVersion100, fmt.Sprintf("containerd %d.%d parses CNI results up to %s", major, minor, CNIVersion100), nil
	case name == "cri-o" && (major > 1 || major == 1 && minor >= 31):
		return CNIVersion110, fmt.Sprintf("CRI-O %d.%d parses CNI %s results", major, minor, CNIVersion110), nil
	case name == "cri-o":
		return CNIVersion100, fmt.Sprintf("CRI-O %d.%d parses CNI results up to %s", major, minor, CNIVersion100), nil
	}
	return CNIVersion100, fmt.Sprintf("container runtime %s %d.%d: %s is parsed by every runtime", name, major, minor, CNIVersion100), nil
}
