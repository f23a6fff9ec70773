package cni

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
)

// Length limits of the identity of an attachment. The plugin writes the
// whole identity into the alias of both veth ends, "svcnet <network>
// <containerID> <ifname>", which the kernel caps at 255 bytes (IFALIASZ - 1),
// and into the comment of each hostport rule, "<network> <containerID>
// <ifname>", which must fit the 256 bytes of a rule's user data; DEL and GC
// read ownership back from both, so neither may be cut short.
const (
	// MaxContainerIDLen is twice the 64 hex digits of the IDs that
	// containerd, CRI-O and Podman generate.
	MaxContainerIDLen = 128
	// maxIfNameLen is the kernel's limit (IFNAMSIZ - 1), as
	// utils.ValidateInterfaceName enforces it.
	maxIfNameLen = 15
	// maxAliasLen is IFALIASZ - 1.
	maxAliasLen = 255
	// MaxNetworkNameLen is what the alias leaves for the network name
	// beside the longest container ID and interface name (103 bytes).
	MaxNetworkNameLen = maxAliasLen - len(aliasPrefix) - 3 - MaxContainerIDLen - maxIfNameLen
)

// quote renders a value of the caller's for an error message: Go-quoted (so
// control characters, NUL and invalid UTF-8 are visible, and a message stays
// one line) and cut to 64 bytes with its full length when longer.
func quote(s string) string {
	const show = 64
	if len(s) <= show {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:show]), len(s))
}

// envError is the error (code 4) for a CNI_* variable whose value breaks a
// rule; the message names the variable and the value.
func envError(variable, value, reason string) *types.Error {
	return types.NewError(types.ErrInvalidEnvironmentVariables,
		fmt.Sprintf("invalid %s %s: %s", variable, quote(value), reason), "")
}

// containerIDProblem applies libcni's rule (utils.ValidateContainerID:
// ^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$) and MaxContainerIDLen; it returns what is
// wrong, "" when nothing is.
func containerIDProblem(id string) string {
	if id == "" {
		return "required"
	}
	if err := utils.ValidateContainerID(id); err != nil {
		return err.Msg + " (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)"
	}
	if len(id) > MaxContainerIDLen {
		return fmt.Sprintf("longer than %d bytes", MaxContainerIDLen)
	}
	return ""
}

// ifNameProblem applies libcni's rule (utils.ValidateInterfaceName: 1 to 15
// bytes, not "." or "..", no '/', ':' or whitespace) and refuses NUL, which
// the kernel would take as the end of the name; it returns what is wrong, ""
// when nothing is.
func ifNameProblem(name string) string {
	if err := utils.ValidateInterfaceName(name); err != nil {
		if err.Details != "" {
			return err.Msg + ": " + err.Details
		}
		return err.Msg
	}
	if strings.ContainsRune(name, 0) {
		return "interface name contains NUL"
	}
	return ""
}

// validateNetNS checks CNI_NETNS as a path: absolute, in canonical form (no
// ".", ".." or empty element) and without NUL. Whether it is a network
// namespace is the kernel's to say (link.CheckNetNS).
func validateNetNS(path string, required bool) *types.Error {
	switch {
	case path == "":
		if required {
			return envError("CNI_NETNS", path, "required")
		}
		return nil
	case strings.ContainsRune(path, 0):
		return envError("CNI_NETNS", path, "contains NUL")
	case !filepath.IsAbs(path):
		return envError("CNI_NETNS", path, "not an absolute path")
	case filepath.Clean(path) != path:
		return envError("CNI_NETNS", path, "not a canonical path (\".\", \"..\" or an empty element); want "+filepath.Clean(path))
	}
	return nil
}

// validateAttachment checks the CNI_* variables that identify attachment a
// for a command that needs a namespace (ADD, CHECK) or not (DEL), before the
// plugin touches any file, lock, namespace or kernel object.
func validateAttachment(a attachment, needNetNS bool) *types.Error {
	if p := containerIDProblem(a.ContainerID); p != "" {
		return envError("CNI_CONTAINERID", a.ContainerID, p)
	}
	if p := ifNameProblem(a.IfName); p != "" {
		return envError("CNI_IFNAME", a.IfName, p)
	}
	return validateNetNS(a.NetNS, needNetNS)
}

// validateNetworkName applies libcni's rule (utils.ValidateNetworkName, the
// characters of a container ID) and MaxNetworkNameLen; the reason is for a
// code-7 error.
func validateNetworkName(name string) error {
	if name == "" {
		return fmt.Errorf("name is missing")
	}
	if err := utils.ValidateNetworkName(name); err != nil {
		return fmt.Errorf("name %s: %s (want [a-zA-Z0-9][a-zA-Z0-9_.-]*)", quote(name), err.Msg)
	}
	if len(name) > MaxNetworkNameLen {
		return fmt.Errorf("name %s: longer than %d bytes", quote(name), MaxNetworkNameLen)
	}
	return nil
}

// validateDataDir checks the IPAM store's directory: absolute, canonical,
// not the root directory, without NUL.
func validateDataDir(dir string) error {
	switch {
	case strings.ContainsRune(dir, 0):
		return fmt.Errorf("dataDir %s: contains NUL", quote(dir))
	case !filepath.IsAbs(dir):
		return fmt.Errorf("dataDir %s: want an absolute path", quote(dir))
	case filepath.Clean(dir) != dir:
		return fmt.Errorf("dataDir %s: not a canonical path (\".\", \"..\" or an empty element); want %s", quote(dir), filepath.Clean(dir))
	case dir == "/":
		return fmt.Errorf("dataDir %s: the root directory cannot hold the IPAM store", quote(dir))
	}
	return nil
}

// validateGCAttachments checks each entry of GC's valid-attachments list as
// CNI_CONTAINERID and CNI_IFNAME are checked: an entry that breaks the rules
// names no attachment the plugin could have made, so the list is wrong.
func validateGCAttachments(list []types.GCAttachment) error {
	for i, v := range list {
		field := fmt.Sprintf("cni.dev/valid-attachments[%d]", i)
		if p := containerIDProblem(v.ContainerID); p != "" {
			return fmt.Errorf("%s.containerID %s: %s", field, quote(v.ContainerID), p)
		}
		if p := ifNameProblem(v.IfName); p != "" {
			return fmt.Errorf("%s.ifname %s: %s", field, quote(v.IfName), p)
		}
	}
	return nil
}
