// Package labtest brings up a lab for one test or benchmark: a normal package
// meant for _test.go files (like internal/kubetest).
package labtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/svcnet/svcnet/internal/kubetest"
	"github.com/svcnet/svcnet/internal/lab"
	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/source/file"
	"github.com/svcnet/svcnet/internal/testbin"
)

// Name returns a lab name unique to this process: prefix and the pid.
func Name(prefix string) string { return fmt.Sprintf("%s%d", prefix, os.Getpid()%100000) }

// Up brings up the lab o describes (o.Name set), removes it when the test
// ends, pass or fail, and applies the manifests at fixture ("" for none). On
// the kube control plane an empty o.K8sBin is $SVCNET_K8S_BIN
// (kubetest.EnvK8sBin), and with svcnet proxy an empty o.DataPlane is
// $SVCNET_DATA_PLANE (testbin.EnvDataPlane). It fails t on any error. The lab is returned open;
// it is closed at the end too.
func Up(t *testing.T, ctx context.Context, o lab.Options, fixture string) *lab.Lab {
	t.Helper()
	if o.ControlPlane == cluster.ControlPlaneKube && o.K8sBin == "" {
		o.K8sBin = os.Getenv(kubetest.EnvK8sBin)
	}
	if o.DataPlane == "" && (o.Proxy == "" || o.Proxy == cluster.ProxySvcnet) {
		o.DataPlane = testbin.DataPlane()
	}
	t.Cleanup(func() {
		if t.Failed() {
			KeepLogs(t, o.Name)
		}
		if err := lab.Down(o.Name); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	l, err := lab.Up(ctx, o)
	if err != nil {
		t.Fatalf("lab up: %v", err)
	}
	t.Cleanup(l.Close)
	if fixture == "" {
		return l
	}
	objs, bad, err := file.ReadManifests(fixture)
	if err != nil || len(bad) > 0 {
		t.Fatalf("fixture %s: %v %v", fixture, err, bad)
	}
	if errs := l.Apply(ctx, objs); len(errs) > 0 {
		t.Fatalf("apply %s: %v", fixture, errs)
	}
	return l
}

// KeepLogs copies the logs of the lab name (its agents', its pods') out of
// the lab's state, which lab down removes, into a new directory under
// os.TempDir (or $SVCNET_LAB_LOGS), and says where. Up calls it when the
// test has failed; a test that takes its lab down itself calls it first.
func KeepLogs(t *testing.T, name string) {
	src := filepath.Join(topology.RunRoot, name, "logs")
	if _, err := os.Stat(src); err != nil {
		return // the lab is down: its logs were kept, or there were none
	}
	dst, err := os.MkdirTemp(os.Getenv(EnvLogs), "svcnet-lab-logs-"+name+"-")
	if err != nil {
		t.Logf("keeping the lab's logs: %v", err)
		return
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Logf("keeping the lab's logs from %s: %v", src, err)
		return
	}
	t.Logf("the lab's logs are kept in %s", dst)
}

// EnvLogs names the directory failed tests' lab logs are kept under
// (KeepLogs; default os.TempDir).
const EnvLogs = "SVCNET_LAB_LOGS"
