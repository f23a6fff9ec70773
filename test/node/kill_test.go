package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/prometheus/procfs"

	"github.com/svcnet/svcnet/internal/nodecluster"
	"github.com/svcnet/svcnet/internal/nodecluster/nodetest"
)

// envHelper carries the options of runKilledHelper's cluster (JSON); only
// TestDownAfterKill sets it, for the test binary it runs as the harness.
const envHelper = "SVCNET_NODE_KILL_HELPER"

// helperOptions are the nodecluster.Options the helper process uses.
type helperOptions struct {
	Name, Dir, K8sBin, ContainerdBin, EtcdBin, CNIPlugin string
	Nodes                                                int
	Images                                               []string
}

// helperRunning is the line the helper prints once its Pods run.
const helperRunning = "HELPER: pods running"

// The harness killed with kill -9, once while the nodes' runtimes start and
// once with a Pod running on each node, then Down (the second time after an
// Up of the same name, which must start over the leftover, with none of the
// killed cluster's processes left, shims and containers included): no namespace, cgroup, process, mount or
// file of the cluster is left (nodecluster.Leftovers, and every process the
// cluster had, shims and containers included, gone), and the host's state is
// as it was (hostState). Down is idempotent.
func TestDownAfterKill(t *testing.T) {
	etcd, k8sBin, containerdBin := nodetest.Binaries(t)
	pause, agnhost := testImages(t)
	for _, tc := range []struct {
		name string
		// killAt waits until the helper is where it is to be killed.
		killAt func(ctx context.Context, dir string, lines <-chan string) error
		// podsRunning: Pods ran, so containerd's shims and the containers
		// must outlive the helper (what only the cgroup finds).
		podsRunning bool
		// upAgain: recover with an Up of the same name and directory (which
		// removes the leftover first), then Down; otherwise Down alone.
		upAgain bool
	}{
		{"while the runtimes start", func(ctx context.Context, dir string, _ <-chan string) error {
			return waitFile(ctx, filepath.Join(dir, "nodes", "node2", "containerd.log"))
		}, false, false},
		{"with pods running", func(ctx context.Context, _ string, lines <-chan string) error {
			return waitLine(ctx, lines, helperRunning)
		}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			o := helperOptions{
				Name: nodetest.Name(), Dir: filepath.Join(t.TempDir(), "cluster"), Nodes: 2,
				K8sBin: k8sBin, ContainerdBin: containerdBin, EtcdBin: etcd, CNIPlugin: svcnetBin(t),
				Images: []string{pause, agnhost},
			}
			t.Cleanup(func() { _ = nodecluster.Down(o.Name, o.Dir) })
			before := hostState(t)
			spec, _ := json.Marshal(o)
			helper := exec.CommandContext(ctx, os.Args[0])
			helper.Env = append(os.Environ(), envHelper+"="+string(spec))
			helper.Stderr = os.Stderr
			out, err := helper.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := helper.Start(); err != nil {
				t.Fatal(err)
			}
			lines := make(chan string, 100)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			if err := tc.killAt(ctx, o.Dir, lines); err != nil {
				_ = helper.Process.Kill()
				_ = helper.Wait()
				t.Fatalf("helper: %v", err)
			}
			pids, err := nodecluster.Pids(o.Name)
			if err != nil {
				t.Fatal(err)
			}
			if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = helper.Wait()
			t.Logf("killed the harness with %d processes in the cluster", len(pids))

			// What dies with the harness (parent-death signal) may take a moment.
			time.Sleep(time.Second)
			var survivors []string
			for _, p := range pids {
				if c := commOf(p); c != "" {
					survivors = append(survivors, c)
				}
			}
			t.Logf("outlived the harness: %v", survivors)
			if tc.podsRunning && !slices.Contains(survivors, "containerd-shim") {
				t.Errorf("no containerd shim outlived the harness (%v): the test no longer covers what only the cgroup finds", survivors)
			}

			if tc.upAgain {
				start := time.Now()
				c, err := nodecluster.Up(ctx, nodecluster.Options{
					Name: o.Name, Dir: o.Dir, Nodes: 1, K8sBin: o.K8sBin, ContainerdBin: o.ContainerdBin,
					EtcdBin: o.EtcdBin, CNIPlugin: o.CNIPlugin, Images: []string{pause},
				})
				if err != nil {
					t.Fatalf("up over the leftover: %v", err)
				}
				t.Logf("up over the leftover in %v", time.Since(start).Round(100*time.Millisecond))
				for _, p := range pids {
					if c := commOf(p); c != "" {
						t.Errorf("process %d (%s) of the killed cluster runs on after a new Up", p, c)
					}
				}
				if n, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil || len(n.Items) != 1 {
					t.Errorf("the new cluster: %v, %v", n, err)
				}
				pids = append(pids, mustPids(t, o.Name)...)
				c.Close()
			}
			start := time.Now()
			if err := nodecluster.Down(o.Name, o.Dir); err != nil {
				t.Fatalf("down: %v", err)
			}
			t.Logf("down in %v", time.Since(start).Round(100*time.Millisecond))
			checkClusterGone(t, o.Name, o.Dir, pids, "down")
			checkHostState(t, before)
			if err := nodecluster.Down(o.Name, o.Dir); err != nil {
				t.Errorf("second down: %v", err)
			}
		})
	}
}

// runKilledHelper is the harness TestDownAfterKill kills (TestMain runs it
// instead of the tests when envHelper is set): it brings a cluster up as spec
// says, runs a Pod on each node, prints helperRunning and waits to be killed.
func runKilledHelper(spec string) error {
	var ho helperOptions
	if err := json.Unmarshal([]byte(spec), &ho); err != nil {
		return err
	}
	ctx := context.Background()
	c, err := nodecluster.Up(ctx, nodecluster.Options{
		Name: ho.Name, Dir: ho.Dir, Nodes: ho.Nodes, K8sBin: ho.K8sBin, ContainerdBin: ho.ContainerdBin,
		EtcdBin: ho.EtcdBin, CNIPlugin: ho.CNIPlugin, Images: ho.Images,
	})
	if err != nil {
		return err
	}
	for _, n := range c.Nodes {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p-" + n.Name, Namespace: "default"},
			Spec: corev1.PodSpec{
				NodeName:                      n.Name,
				TerminationGracePeriodSeconds: ptr.To(int64(1)),
				Containers: []corev1.Container{{
					Name: "netexec", Image: agnhostImage, ImagePullPolicy: corev1.PullIfNotPresent,
					Args: []string{"netexec", fmt.Sprintf("--http-port=%d", netexecPort)},
				}},
			},
		}
		if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) == len(c.Nodes) && !slices.ContainsFunc(list.Items, func(p corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning }) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Pods not running after 3m: %v\n%s", err, podStates(list))
		}
		time.Sleep(500 * time.Millisecond)
	}
	fmt.Println(helperRunning)
	time.Sleep(10 * time.Minute) // until killed
	return errors.New("not killed within 10 minutes")
}

func mustPids(t *testing.T, name string) []int {
	t.Helper()
	pids, err := nodecluster.Pids(name)
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

func waitLine(ctx context.Context, lines <-chan string, want string) error {
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return fmt.Errorf("exited before printing %q", want)
			}
			if strings.Contains(l, want) {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("no %q: %w", want, ctx.Err())
		}
	}
}

func waitFile(ctx context.Context, path string) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no %s: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// commOf is the command name of a running (not zombie) process pid, or "".
func commOf(pid int) string {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return ""
	}
	st, err := p.Stat()
	if err != nil || st.State == "Z" {
		return ""
	}
	return st.Comm
}
