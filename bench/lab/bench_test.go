package labbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/bench/benchenv"
	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

const (
	envSizes   = "SVCNET_BENCH_SIZES"
	envChanges = "SVCNET_BENCH_CHANGES"
	labName    = "benchlab"
	// gets is how many times each get runs.
	gets = 5
	// settleBound bounds the wait for the lab's readers to finish loading.
	settleBound = 3 * time.Minute
)

func TestBenchLab(t *testing.T) {
	benchenv.RootGate(t, "bench-lab")
	bin := benchenv.SvcnetBinary(t)
	_, k8sBin := kubetest.Binaries(t, "kube-apiserver", "kubectl")
	kubectl := filepath.Join(k8sBin, "kubectl")
	changes := benchenv.Int(t, envChanges, 30, 1)
	sizes := benchenv.Sizes(t, envSizes, "2000,10000")
	dir := t.TempDir()
	var report []string
	for _, n := range sizes {
		// A subtest per size: its lab and API server are gone before the
		// next size's.
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			svcnet := measureLab(t, bin, dir, n, changes)
			kube := measureKube(t, kubectl, dir, n, changes)
			report = append(report, table(n, svcnet, kube)...)
		})
	}
	t.Log("\n" + strings.Join(report, "\n"))
}

// figures are one side's timings (and get's RSS) at one size.
type figures struct {
	// apply is one apply at a time, each once the last one's effects
	// settled (the lab's readers loaded it); burst, applies back to back.
	apply, burst, get, getState []run
	// getCold is get --state's first run, without the decode cache.
	getCold run
	// getDisk and getStateDisk are get and get --state again, with the
	// binary's pages read from disk (readFromDisk).
	getDisk, getStateDisk []run
}

// run is one command's wall time and maximum RSS.
type run struct {
	took time.Duration
	rss  int64 // bytes
}

func measureLab(t *testing.T, bin, dir string, n, changes int) figures {
	ctx := context.Background()
	down := func() { _ = exec.Command(bin, "lab", "down", "--name", labName).Run() }
	down()
	t.Cleanup(down)
	mustRun(t, bin, "lab", "up", "--name", labName, "--nodes", "2")
	big := filepath.Join(dir, fmt.Sprintf("lab-%d.yaml", n))
	writeServices(t, big, 0, n)
	start := time.Now()
	mustRun(t, bin, "lab", "apply", "--name", labName, "-f", big)
	t.Logf("lab: %d Services applied in %s", n, time.Since(start).Round(time.Millisecond))
	settle(t, ctx, topology.Names{Lab: labName})
	var f figures
	for i := range 2 * changes {
		one := filepath.Join(dir, fmt.Sprintf("lab-one-%d-%d.yaml", n, i))
		writeServices(t, one, n+i, n+i+1)
		if i < changes {
			settle(t, ctx, topology.Names{Lab: labName})
			f.apply = append(f.apply, timed(t, bin, "lab", "apply", "--name", labName, "-f", one))
		} else {
			f.burst = append(f.burst, timed(t, bin, "lab", "apply", "--name", labName, "-f", one))
		}
	}
	// The gets run once the lab's readers have loaded the burst above, as
	// each settled apply does: a get measured beside them measures the
	// contention (its collector falls behind and its heap grows further).
	settle(t, ctx, topology.Names{Lab: labName})
	for range gets {
		f.get = append(f.get, timed(t, bin, "lab", "get", "--name", labName, "svc", "-A"))
	}
	readFromDisk(t, bin)
	for range gets {
		f.getDisk = append(f.getDisk, timed(t, bin, "lab", "get", "--name", labName, "svc", "-A"))
	}
	// get --state on a copy of the publication: its decode cache and state
	// file are written beside it, not into the lab.
	pub := filepath.Join(dir, fmt.Sprintf("published-%d", n), "cluster.yaml")
	b, err := os.ReadFile(topology.Names{Lab: labName}.Path("cluster", "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(pub), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f.getCold = timed(t, bin, "get", "services", "-A", "--state", pub)
	for range gets {
		f.getState = append(f.getState, timed(t, bin, "get", "services", "-A", "--state", pub))
	}
	readFromDisk(t, bin)
	for range gets {
		f.getStateDisk = append(f.getStateDisk, timed(t, bin, "get", "services", "-A", "--state", pub))
	}
	down()
	return f
}

func measureKube(t *testing.T, kubectl, dir string, n, changes int) figures {
	env := kubetest.Start(t, kubetest.Options{})
	ctx := context.Background()
	start := time.Now()
	createServices(t, ctx, env.Client, n)
	t.Logf("kube-apiserver: %d Services created in %s", n, time.Since(start).Round(time.Millisecond))
	var f figures
	for i := range 2 * changes {
		one := filepath.Join(dir, fmt.Sprintf("kube-one-%d-%d.yaml", n, i))
		writeServices(t, one, n+i, n+i+1)
		r := timed(t, kubectl, "--kubeconfig", env.Kubeconfig, "apply", "-f", one)
		if i < changes {
			f.apply = append(f.apply, r)
		} else {
			f.burst = append(f.burst, r)
		}
	}
	for range gets {
		f.get = append(f.get, timed(t, kubectl, "--kubeconfig", env.Kubeconfig, "get", "services", "-A"))
	}
	readFromDisk(t, kubectl)
	for range gets {
		f.getDisk = append(f.getDisk, timed(t, kubectl, "--kubeconfig", env.Kubeconfig, "get", "services", "-A"))
	}
	return f
}

// service is Service i of a population: one TCP port, a selector no Pod
// matches.
func service(i int) *corev1.Service {
	name := fmt.Sprintf("svc-%05d", i)
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}
}

// writeServices writes Services from to to-1 to path, one JSON document
// each.
func writeServices(t *testing.T, path string, from, to int) {
	t.Helper()
	var buf bytes.Buffer
	for i := from; i < to; i++ {
		b, err := json.Marshal(service(i))
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// createServices creates Services 0 to n-1, eight at a time.
func createServices(t *testing.T, ctx context.Context, c kubernetes.Interface, n int) {
	t.Helper()
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if _, err := c.CoreV1().Services("default").Create(ctx, service(i), metav1.CreateOptions{}); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatalf("creating Services: %v", first)
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// settle waits until the lab's processes other than the commands' (its
// proxies and DNS server) use no more CPU for a second, bounded by
// settleBound.
func settle(t *testing.T, ctx context.Context, n topology.Names) {
	t.Helper()
	deadline := time.Now().Add(settleBound)
	last, quiet := labCPU(n), 0
	for quiet < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the lab's processes did not settle within %s", settleBound)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
		now := labCPU(n)
		if now-last <= 2 { // clock ticks: 20 ms of CPU in 250 ms
			quiet++
		} else {
			quiet = 0
		}
		last = now
	}
}

// labCPU sums the CPU time (clock ticks) of the processes whose command
// line names the lab's directory: its proxies, DNS server and supervisors.
func labCPU(n topology.Names) int64 {
	var sum int64
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cmd, []byte(n.Dir())) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command's parenthesis: utime and stime are the
		// 12th and 13th.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			sum += u + s
		}
	}
	return sum
}

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(out))
	}
}

// fromDisk names the runs after readFromDisk in the table.
const fromDisk = "  binary read from disk"

// readFromDisk drops the page cache of the binary at path (that file's
// alone), so that the runs after it map the binary's pages as they are read
// from disk, as an installed binary's are (a package's, a container
// image's, any after the page cache let them go). A binary the linker has
// just written (bin/svcnet, built by the bench's make target) sits in the
// page cache as the linker wrote it, and a process maps more of it on each
// fault: on this machine's kernel 6.18, `svcnet version` has a maximum RSS
// of about 46 MiB from a freshly linked binary and 36-37 MiB from the same
// file read from disk. The table shows both. (svcnet's lab agents run the
// same binary, and fault some of its pages back in meanwhile.)
func readFromDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Dirty pages are not dropped: write them first.
	if err := f.Sync(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("dropping the page cache of %s: %v", path, err)
	}
}

// timed runs a command, which must succeed, and returns its wall time and
// maximum RSS.
func timed(t *testing.T, name string, args ...string) run {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(out.Bytes()))
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss * 1024
	}
	return run{took: took, rss: rss}
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// quantile returns the q-quantile of runs' times (nearest rank).
func quantile(runs []run, q float64) time.Duration {
	ts := make([]time.Duration, len(runs))
	for i, r := range runs {
		ts[i] = r.took
	}
	slices.Sort(ts)
	i := int(q*float64(len(ts))+0.999999) - 1
	return ts[max(0, min(i, len(ts)-1))]
}

func maxRSS(runs []run) int64 {
	var m int64
	for _, r := range runs {
		m = max(m, r.rss)
	}
	return m
}

func table(n int, svcnet, kube figures) []string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	ratio := func(a, b time.Duration) string { return fmt.Sprintf("%.2f×", float64(b)/float64(a)) }
	lines := []string{
		fmt.Sprintf("%d Services (ratio: kubectl's time / svcnet's; above 1 svcnet is faster)", n),
		fmt.Sprintf("  %-34s %10s %10s %10s %8s", "", "p50", "p90", "max", "RSS"),
	}
	row := func(name string, rs []run, withRSS bool) {
		rss := ""
		if withRSS {
			rss = mib(maxRSS(rs))
		}
		lines = append(lines, fmt.Sprintf("  %-34s %10s %10s %10s %8s", name, ms(quantile(rs, 0.5)), ms(quantile(rs, 0.9)), ms(quantile(rs, 1)), rss))
	}
	for _, a := range []struct {
		how          string
		lab, kubectl []run
	}{{"settled", svcnet.apply, kube.apply}, {"back to back", svcnet.burst, kube.burst}} {
		row(fmt.Sprintf("svcnet lab apply, %s ×%d", a.how, len(a.lab)), a.lab, false)
		row(fmt.Sprintf("kubectl apply, %s ×%d", a.how, len(a.kubectl)), a.kubectl, false)
		lines = append(lines, fmt.Sprintf("  %-34s %10s %10s", "  ratio", ratio(quantile(a.lab, 0.5), quantile(a.kubectl, 0.5)), ratio(quantile(a.lab, 0.9), quantile(a.kubectl, 0.9))))
	}
	row("svcnet lab get svc -A", svcnet.get, true)
	row(fromDisk, svcnet.getDisk, true)
	row("svcnet get services -A --state", svcnet.getState, true)
	row(fromDisk, svcnet.getStateDisk, true)
	row("  first run (no decode cache)", []run{svcnet.getCold}, true)
	row("kubectl get services -A", kube.get, true)
	row(fromDisk, kube.getDisk, true)
	lines = append(lines, fmt.Sprintf("  %-34s %10s", "  ratio (get --state)", ratio(quantile(svcnet.getState, 0.5), quantile(kube.get, 0.5))))
	return lines
}
