package netns_test

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

func TestCreateDoDelete(t *testing.T) {
	ns := netnstest.New(t, "basic")
	hostIno := threadNS(t)
	var inner string
	if err := ns.Do(func() error {
		inner = inode(t, "/proc/thread-self/ns/net")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if inner == hostIno {
		t.Fatalf("Do ran in the host namespace")
	}
	if got := threadNS(t); got != hostIno {
		t.Fatalf("a thread was left in %s", got)
	}
	out, err := ns.Command("ip", "-o", "link", "show", "lo").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns exec: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "UP") {
		t.Fatalf("lo not up in new namespace: %s", out)
	}
	if _, err := netns.Create(ns.Name()); err == nil {
		t.Fatalf("second Create of %s succeeded", ns.Name())
	}
	if err := ns.Delete(); err != nil {
		t.Fatal(err)
	}
	if netns.Exists(ns.Name()) {
		t.Fatalf("%s still exists after Delete", ns.Name())
	}
	if err := netns.DeleteNamed(ns.Name()); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func inode(t *testing.T, p string) string {
	t.Helper()
	s, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// threadNS reads the namespace of a locked thread that is not the one Do used.
func threadNS(t *testing.T) string {
	t.Helper()
	c := make(chan string)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		s, _ := os.Readlink("/proc/thread-self/ns/net")
		c <- s
	}()
	return <-c
}

// CommandNetIn switches the network namespace only: the command shares the
// caller's mount namespace, so a namespace it adds is usable by others.
func TestCommandNetIn(t *testing.T) {
	ns := netnstest.New(t, "netin")
	var want string
	if err := ns.Do(func() error { want = inode(t, "/proc/thread-self/ns/net"); return nil }); err != nil {
		t.Fatal(err)
	}
	out, err := netns.CommandNetIn(context.Background(), ns.Name(), "readlink", "/proc/self/ns/net", "/proc/self/ns/mnt").CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter: %v: %s", err, out)
	}
	if got := strings.Fields(string(out)); len(got) != 2 || got[0] != want || got[1] != inode(t, "/proc/self/ns/mnt") {
		t.Fatalf("command in %q, want net %s and the caller's mount namespace %s", got, want, inode(t, "/proc/self/ns/mnt"))
	}
	inner := ns.Name() + "-in"
	t.Cleanup(func() { _ = netns.DeleteNamed(inner) })
	if out, err := netns.CommandNetIn(context.Background(), ns.Name(), "ip", "netns", "add", inner).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add from inside: %v: %s", err, out)
	}
	if out, err := netns.CommandIn(context.Background(), inner, "true").CombinedOutput(); err != nil {
		t.Fatalf("namespace added from inside is not usable outside: %v: %s", err, out)
	}
}
