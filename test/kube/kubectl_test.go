package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/kubetest"
)

// sideBySide runs real kubectl (built from the Kubernetes module, tools/k8s)
// and svcnet side by side against one API server.
type sideBySide struct {
	t               *testing.T
	ctx             context.Context
	env             *kubetest.Env
	kubectl, svcnet string
}

// newSideBySide starts an API server, waits until it serves, and builds both
// commands; the context ends with the test.
func newSideBySide(t *testing.T) *sideBySide {
	// Dual-stack, so that a Service may have a ClusterIP of each family.
	env := kubetest.Start(t, kubetest.Options{ServiceClusterIPRange: "10.96.0.0/12,fd00:96::/108"})
	_, binDir := kubetest.Binaries(t, "kubectl")
	p := &sideBySide{t: t, env: env, kubectl: filepath.Join(binDir, "kubectl"), svcnet: buildSvcnet(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	p.ctx = ctx
	kubetest.Eventually(t, 30*time.Second, "default/kubernetes", func() (bool, string) {
		_, err := env.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	return p
}

// both runs `kubectl --kubeconfig K ARGS` and `svcnet ARGS --kubeconfig
// K` and returns each one's stdout, stderr and exit status.
func (p *sideBySide) both(args ...string) (k, s result) {
	p.t.Helper()
	return p.run(p.kubectl, append([]string{"--kubeconfig", p.env.Kubeconfig}, args...)...),
		p.run(p.svcnet, append(args, "--kubeconfig", p.env.Kubeconfig)...)
}

type result struct {
	stdout, stderr string
	code           int
}

func (p *sideBySide) run(name string, args ...string) result {
	p.t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(p.ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		p.t.Fatalf("%s %q: %v", name, args, err)
	}
	return result{stdout.String(), stderr.String(), code}
}
