package controlplane

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// digest hashes parts joined by NUL, so ("a/b","c") and ("a","b/c") differ.
func digest(parts ...string) [sha256.Size]byte {
	return sha256.Sum256([]byte(strings.Join(parts, "\x00")))
}

// seed64 returns a deterministic 64-bit number for parts: the start of a probe.
func seed64(parts ...string) uint64 {
	d := digest(parts...)
	return binary.BigEndian.Uint64(d[:8])
}

// makeUID returns a UUID-shaped (version 5, RFC 4122 variant) UID derived from parts,
// so the same identity always gets the same UID.
func makeUID(parts ...string) types.UID {
	d := digest(parts...)
	d[6] = d[6]&0x0f | 0x50
	d[8] = d[8]&0x3f | 0x80
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", d[0:4], d[4:6], d[6:8], d[8:10], d[10:16]))
}

// nameAlphabet is the alphabet of the apiserver's generateName suffixes (no vowels,
// no confusable characters).
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// Limits of the apiserver's name generator: the base is cut so base+suffix fits a
// DNS label.
const (
	nameSuffixLen    = 5
	maxGeneratedBase = 63 - nameSuffixLen
)

// nameSuffix returns nameSuffixLen characters of nameAlphabet derived from parts.
func nameSuffix(parts ...string) string {
	d := digest(parts...)
	n := binary.BigEndian.Uint64(d[:8])
	b := make([]byte, nameSuffixLen)
	for i := range b {
		b[i] = nameAlphabet[n%uint64(len(nameAlphabet))]
		n /= uint64(len(nameAlphabet))
	}
	return string(b)
}

// generateName does what the apiserver does with metadata.generateName, but
// deterministically: the base cut to 58 characters, then a 5-character suffix.
func generateName(base string, parts ...string) string {
	if len(base) > maxGeneratedBase {
		base = base[:maxGeneratedBase]
	}
	return base + nameSuffix(parts...)
}
