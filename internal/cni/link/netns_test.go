package link

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

// CheckNetNS tells network namespaces from every other file without opening
// it: a FIFO would block an open for reading until a writer came.
func TestCheckNetNS(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/proc/self/ns/net", "/proc/thread-self/ns/net"} {
		if err := CheckNetNS(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	for _, path := range []string{fifo, file, dir, "/dev/null", "/proc/self/ns/mnt/x"} {
		err := CheckNetNS(path)
		if !errors.Is(err, ErrNetNS) {
			t.Errorf("%s: %v, want ErrNetNS", path, err)
		}
	}
	if err := CheckNetNS(fifo); !strings.Contains(err.Error(), "not a network namespace (file system 0x") {
		t.Errorf("FIFO: %v", err)
	}
	if err := CheckNetNS(filepath.Join(dir, "missing")); !errors.Is(err, ErrNetNS) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v, want ErrNetNS and ErrNotExist", err)
	}
}

// A named namespace (a bind mount under /run/netns) passes and opens; the
// same path after the namespace is deleted does not.
func TestOpenNSNamed(t *testing.T) {
	ns := netnstest.New(t, "linkns")
	path := ns.Path()
	n, err := openNS(path)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	if err := ns.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := openNS(path); !errors.Is(err, ErrNetNS) {
		t.Fatalf("open after delete: %v", err)
	}
}

// sysctl refuses a key whose elements are not plain names, so an interface
// name can never lead a write out of /proc/sys/net/*/conf/<ifname>/.
func TestSysctlRefusesPathElements(t *testing.T) {
	for _, ifname := range []string{"..", ".", "", "a/../../b", "eth0\x00"} {
		err := sysctl("1", "net/ipv4/conf", ifname, "forwarding")
		if err == nil || !strings.Contains(err.Error(), "is not a plain name") {
			t.Errorf("sysctl with interface %q: %v", ifname, err)
		}
	}
}
