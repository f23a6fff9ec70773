package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/process"
	"github.com/svcnet/svcnet/internal/testbin"
)

// testContainerd is a containerd (tools/containerd, v2) of the test's own:
// its root, state, socket and fifos in a temporary directory, run by unshare
// in new mount (with a tmpfs on /run), network and PID namespaces (its overlay mounts, the shims and the
// containers go with it), with the CRI and NRI plugins off.
type testContainerd struct {
	ctr, socket string
	// fifos is ctr run's --fifo-dir (ctr's default is /run/containerd/fifo).
	fifos string
}

func startContainerd(t *testing.T, ctx context.Context) *testContainerd {
	t.Helper()
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("SVCNET_CONTAINERD_BIN")
	if bin == "" {
		bin, err = scriptDir(ctx, root, "tools/containerd/build.sh", nil, "containerd", "ctr", "containerd-shim-runc-v2")
	} else {
		err = executables(bin, "containerd", "ctr", "containerd-shim-runc-v2")
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatalf("runc: %v (hack/install-deps.sh installs it)", err)
	}
	// containerd's fixed host paths: the test must not create them.
	var absent []string
	for _, p := range []string{"/run/containerd", "/run/nri", "/var/lib/containerd", "/opt/containerd"} {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			absent = append(absent, p)
		}
	}
	t.Cleanup(func() {
		for _, p := range absent {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s exists after the test's containerd: it must keep its files to itself", p)
			}
		}
	})
	dir := t.TempDir()
	c := &testContainerd{ctr: filepath.Join(bin, "ctr"), socket: filepath.Join(dir, "containerd.sock"), fifos: filepath.Join(dir, "fifo")}
	cfg := fmt.Sprintf(`version = 3
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images", "io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.socket, c.socket+".ttrpc")
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// containerd and its shims keep fixed paths under /run (/run/containerd/s
	// for the shims' sockets, /run/containerd/runc for runc's state): a tmpfs
	// of the namespace's own holds them, so nothing is made on the host.
	cmd := exec.Command("unshare", "--mount", "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private",
		"sh", "-c", `mount -t tmpfs -o mode=0755 tmpfs /run && exec "$@"`, "sh",
		filepath.Join(bin, "containerd"), "--config", filepath.Join(dir, "config.toml"))
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// unshare --fork ignores SIGTERM; SIGKILL ends it, and --kill-child
		// then kills containerd, PID 1 of the namespace, and so every shim
		// and container; the mount namespace and its mounts go with them.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			t.Logf("containerd log:\n%s", process.LogTail(filepath.Join(dir, "containerd.log"), 30))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.run(ctx, "version"); err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd not serving on %s after 30s:\n%s", c.socket, process.LogTail(filepath.Join(dir, "containerd.log"), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// run runs ctr against the test's containerd in namespace k8s.io.
func (c *testContainerd) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.ctr, append([]string{"--address", c.socket, "--namespace", CRINamespace}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// container runs argv (the image's entrypoint and command when empty) in a
// container of image with its own network namespace and no cgroup (the test
// makes none on the host), and returns its output.
func (c *testContainerd) container(ctx context.Context, image, id string, argv ...string) (string, error) {
	return c.run(ctx, append([]string{"run", "--rm", "--cgroup=", "--fifo-dir", c.fifos, image, id}, argv...)...)
}

// TestImagesRunInContainerd (root) builds svcnet's image and the test images,
// imports them into containerd v2 with ctr as the node tier does, and runs
// what each is relied on for: the digest containerd shows is the one built;
// svcnet runs from $PATH; pause exits 0 on SIGTERM; CoreDNS binds port 53 as
// its non-root user through its file capability; agnhost has its user and
// group, its TLS files in the working directory and GNU wget.
func TestImagesRunInContainerd(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "svcnet")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/svcnet")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./cmd/svcnet: %v\n%s", err, out)
	}
	svcnetRef := SvcnetRepository + ":test"
	svcnetImg, err := Svcnet(bin, svcnetRef)
	if err != nil {
		t.Fatal(err)
	}
	b := testCache(t)
	svcnet, err := b.Build(ctx, svcnetImg)
	if err != nil {
		t.Fatal(err)
	}
	tbs, err := BuildTestImages(ctx, TestImageOptions{Builder: b})
	if err != nil {
		t.Fatal(err)
	}
	tbs = append(tbs, svcnet)

	c := startContainerd(t, ctx)
	archives := make([]string, len(tbs))
	for i, tb := range tbs {
		archives[i] = tb.Path
	}
	start := time.Now()
	if err := Import(ctx, c.ctr, c.socket, archives...); err != nil {
		t.Fatal(err)
	}
	t.Logf("imported %d images in %s", len(tbs), time.Since(start).Round(100*time.Millisecond))
	ls, err := c.run(ctx, "images", "ls")
	if err != nil {
		t.Fatalf("ctr images ls: %v\n%s", err, ls)
	}
	for _, tb := range tbs {
		for _, r := range tb.Refs {
			if !strings.Contains(ls, r+" ") || !strings.Contains(ls, tb.Digest) {
				t.Errorf("ctr images ls has no %s at %s:\n%s", r, tb.Digest, ls)
			}
		}
	}

	t.Run("svcnet", func(t *testing.T) {
		out, err := c.container(ctx, svcnetRef, "svcnet", "svcnet", "version")
		if err != nil || !strings.Contains(out, "svcnet ") {
			t.Errorf("svcnet version: %v\n%s", err, out)
		}
	})
	t.Run("pause", func(t *testing.T) {
		var (
			out string
			err error
			wg  sync.WaitGroup
		)
		wg.Add(1)
		go func() { defer wg.Done(); out, err = c.container(ctx, PauseImage, "pause") }()
		waitTask(t, ctx, c, "pause", "RUNNING")
		if o, err := c.run(ctx, "task", "kill", "--signal", "SIGTERM", "pause"); err != nil {
			t.Errorf("ctr task kill: %v\n%s", err, o)
		}
		wg.Wait()
		if err != nil || !strings.Contains(out, "Shutting down, got signal") {
			t.Errorf("pause after SIGTERM: %v (want exit 0)\n%s", err, out)
		}
	})
	t.Run("coredns", func(t *testing.T) {
		var (
			out string
			wg  sync.WaitGroup
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, _ = c.container(ctx, CoreDNSRepository+":"+testVersion(t, root, "tools/coredns/VERSION"), "coredns")
		}()
		waitTask(t, ctx, c, "coredns", "RUNNING")
		time.Sleep(2 * time.Second) // CoreDNS binds, or exits, within this
		c.run(ctx, "task", "kill", "--signal", "SIGTERM", "coredns")
		wg.Wait()
		if !strings.Contains(out, ".:53") || strings.Contains(out, "permission denied") {
			t.Errorf("coredns as 65532: want it serving .:53 (cap_net_bind_service):\n%s", out)
		}
	})
	t.Run("agnhost", func(t *testing.T) {
		out, err := c.container(ctx, AgnhostImage, "agnhost", "sh", "-c",
			"id user-defined-in-image && head -c 27 localhost.crt && echo && wget --version | head -1 && readlink /agnhost-2 && /agnhost --help | head -1")
		for _, want := range []string{"groups=1000(user-defined-in-image),50000(group-defined-in-image)", "-----BEGIN CERTIFICATE-----", "GNU Wget", "agnhost\n", "Usage:"} {
			if !strings.Contains(out, want) {
				t.Errorf("agnhost: no %q in (%v):\n%s", want, err, out)
			}
		}
	})
}

// waitTask waits, at most 30 s, until the task id has status.
func waitTask(t *testing.T, ctx context.Context, c *testContainerd, id, status string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := c.run(ctx, "task", "ls")
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == id && f[2] == status {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s not %s after 30s:\n%s", id, status, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func testVersion(t *testing.T, root, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
