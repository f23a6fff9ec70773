package topology

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Limits of the names the lab makes from object names. A file name (and so a
// named network namespace under /run/netns, and its /etc/netns directory) is
// at most 255 bytes (NAME_MAX); a Pod's namespace and name alone may be
// 63 + 1 + 253 bytes, and the lab prefixes them.
const (
	// maxPodKey bounds the pod part of a pod's network namespace name
	// (NAME.pod.KEY, at most 32 + 5 + 200 bytes) and of its log file.
	maxPodKey = 200
	// MaxObjectKey bounds an object's file name in objects/ (KEY.yaml), which
	// is written through a temporary file named .KEY.yaml.NNNNNNNNNN.tmp.
	MaxObjectKey = 200
	// hashedTail is the length of "~" and the hex digest ending a shortened key.
	hashedTail = 1 + 32
)

// NameKey joins the parts of an object's identity (kind, namespace, name) with
// '.' into one file or namespace name of at most max bytes, injectively:
//
//   - parts that are valid Kubernetes names (bytes [a-z0-9.-], as
//     controlplane.ValidateName allows; a kind may also have capitals), of which
//     only the last contains a '.', and whose join fits, are joined as they
//     are: such a key is split back unambiguously at its first dots;
//   - anything else (too long, or a part with other bytes, a '.' before the
//     last part, or "." or "..") becomes a readable prefix of at most
//     max-hashedTail bytes, with every other byte (and a leading '.')
//     replaced by '_', then '~' and 128 bits of the SHA-256 of the parts. No
//     plain key holds a '~' or '_', so a shortened key never equals a plain one.
//
// The result never contains '/' or NUL, never starts with '.' (a hidden file
// is not read as a manifest) and is never "." or "..", whatever the
// parts: callers validate names first (with the apiserver's rules, for an
// error the user can act on), and NameKey keeps paths safe even if one did
// not.
func NameKey(max int, parts ...string) string {
	joined := strings.Join(parts, ".")
	if len(joined) <= max && plainParts(parts) {
		return joined
	}
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	readable := []byte(joined)
	if n := max - hashedTail; len(readable) > n {
		readable = readable[:n]
	}
	for i, b := range readable {
		if !plainByte(b) && (b != '.' || i == 0) {
			readable[i] = '_'
		}
	}
	return string(readable) + "~" + hex.EncodeToString(sum[:16])
}

// plainParts reports whether parts can be joined as they are (see NameKey).
func plainParts(parts []string) bool {
	for i, p := range parts {
		if p == "" || p[0] == '.' {
			return false
		}
		for j := 0; j < len(p); j++ {
			b := p[j]
			if b == '.' && i == len(parts)-1 {
				continue
			}
			if !plainByte(b) {
				return false
			}
		}
	}
	return true
}

func plainByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-'
}
