package cni

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// HostVethName returns the name of the node end of an attachment's veth:
// "veth" and 8 hex digits of a hash of the container ID and interface name
// (the kernel allows 15 bytes, too few for the identity itself), so DEL and
// GC find the link again from the attachment alone. Ownership is the alias,
// not the name: a link of this name with another alias (an identity that
// hashes alike) is refused by ADD and left alone by DEL.
func HostVethName(containerID, ifname string) string {
	sum := sha256.Sum256([]byte(containerID + "\x00" + ifname))
	return "veth" + hex.EncodeToString(sum[:4])
}

// aliasPrefix starts the alias of every link the plugin makes.
const aliasPrefix = "svcnet"

// Alias returns the alias set on both ends of an attachment's veth:
// "svcnet <network> <containerID> <ifname>". CNI restricts network names and
// container IDs to [A-Za-z0-9_.-] and interface names hold no whitespace, so
// the fields can be read back (ParseAlias).
func Alias(network, containerID, ifname string) string {
	return strings.Join([]string{aliasPrefix, network, containerID, ifname}, " ")
}

// ParseAlias reads an alias made by Alias; ok is false for any other text.
func ParseAlias(s string) (network, containerID, ifname string, ok bool) {
	f := strings.Split(s, " ")
	if len(f) != 4 || f[0] != aliasPrefix || f[1] == "" || f[2] == "" || f[3] == "" {
		return "", "", "", false
	}
	return f[1], f[2], f[3], true
}
