package link

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sysctl writes value to /proc/sys/<parts...> in the calling thread's network
// namespace (/proc/sys/net follows the thread that opens it). Interface names
// are path components, so a name with dots needs no escaping.
func sysctl(value string, parts ...string) error {
	p := filepath.Join(append([]string{"/proc/sys"}, parts...)...)
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == value {
		return nil
	}
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", strings.Join(parts, "."), value, err)
	}
	return nil
}
