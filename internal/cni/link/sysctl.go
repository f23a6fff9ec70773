package link

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sysctl writes value to /proc/sys/<parts...> in the calling thread's network
// namespace (/proc/sys/net follows the thread that opens it). Interface names
// are path components, so a name with dots needs no escaping; every element
// of parts must be a plain name (not empty, ".", ".." or containing NUL), so
// an interface name can never lead the write out of its directory.
func sysctl(value string, parts ...string) error {
	for _, part := range parts {
		for _, e := range strings.Split(part, "/") {
			if e == "" || e == "." || e == ".." || strings.ContainsRune(e, 0) {
				return fmt.Errorf("sysctl %q: %q is not a plain name", strings.Join(parts, "/"), part)
			}
		}
	}
	p := filepath.Join(append([]string{"/proc/sys"}, parts...)...)
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == value {
		return nil
	}
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", strings.Join(parts, "."), value, err)
	}
	return nil
}
