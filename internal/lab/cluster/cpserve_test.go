package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/logtest"
	"github.com/svcnet/svcnet/internal/netns/netnstest"
	"github.com/svcnet/svcnet/internal/source/file"
)

// An error crosses the socket as it was: the same text, and an
// ObjectError or DocError still one, with its fields.
func TestWireErrorsKeepTheirKind(t *testing.T) {
	obj := &controlplane.ObjectError{Origin: "web.yaml#1", Kind: "Service", Namespace: "default", Name: "web",
		Err: errors.New("spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive")}
	doc := &file.DocError{Origin: "bad.yaml#2", Err: errors.New("unknown kind Widget")}
	wrapped := fmt.Errorf("objects/x.yaml: %w", obj) // not an ObjectError's text: plain
	for _, in := range []error{obj, doc, wrapped, errors.New("disk full")} {
		out := toWireError(in).err()
		if out.Error() != in.Error() {
			t.Errorf("%q came back as %q", in, out)
		}
		var oe *controlplane.ObjectError
		var de *file.DocError
		if errors.As(in, &oe) && in == error(obj) {
			if !errors.As(out, &oe) || oe.Origin != obj.Origin || oe.Kind != obj.Kind || oe.Namespace != obj.Namespace || oe.Name != obj.Name {
				t.Errorf("%q: not the same ObjectError: %#v", in, out)
			}
		}
		if in == error(doc) && (!errors.As(out, &de) || de.Origin != doc.Origin) {
			t.Errorf("%q: not the same DocError: %#v", in, out)
		}
		if in == wrapped && errors.As(out, &oe) {
			t.Errorf("%q: came back as an ObjectError of another text", in)
		}
	}
}

// The daemon serves a peer of its own user only, by the kernel's account
// of the peer.
func TestCheckPeer(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "a")
	defer f.Close()
	defer syscall.Close(fds[1])
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn := c.(*net.UnixConn)
	if err := checkPeer(conn, os.Getuid()); err != nil {
		t.Errorf("own user refused: %v", err)
	}
	if err := checkPeer(conn, os.Getuid()+1); err == nil {
		t.Error("another user served")
	}
}

// The lab's commands send their changes to the control-plane daemon, which
// makes them as the command would have: the same errors (with the user's
// origins), the same warnings, the same publication. Without a daemon (a
// stale socket, or none), a command makes them itself.
func TestControlPlaneDaemon(t *testing.T) {
	netnstest.RequireRoot(t) // the lab's state is under /run/svcnet/lab
	ctx := context.Background()
	newLab := func(suffix string) topology.Names {
		n := topology.Names{Lab: fmt.Sprintf("cpd%d%s", os.Getpid()%100000, suffix)}
		t.Cleanup(func() { _ = os.RemoveAll(n.Dir()) })
		if err := os.MkdirAll(n.Dir(), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WriteInfo(n, &Info{Name: n.Lab, Nodes: 1, ControlPlane: ControlPlaneFile}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	served, local := newLab("d"), newLab("l")

	// A socket a dead daemon left: a command finds no daemon and does the
	// work itself, and a daemon starting replaces it.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: ControlPlaneSocket(served), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	if _, err := call(ctx, ControlPlaneSocket(served), cpRequest{Op: opApply}); !errors.Is(err, errNoDaemon) {
		t.Fatalf("stale socket: %v, want errNoDaemon", err)
	}

	var sink logtest.Sink
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- ServeControlPlane(dctx, served, func(r *controlplane.Result, objs []controlplane.Object) []string {
			var out []string
			for _, o := range objs {
				out = append(out, fmt.Sprintf("%s: %d Services held", o.Origin, len(r.Services)))
			}
			return out
		}, sink.Logger(0))
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
			<-done
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", ControlPlaneSocket(served))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not listening: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if fi, err := os.Stat(ControlPlaneSocket(served)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}

	remote, direct := NewFile(served, nil), NewFile(local, nil)
	remote.Attach(ControlPlaneSocket(served))
	svc := func(name string, port int32) controlplane.Object {
		return controlplane.Object{Origin: "user/" + name + ".yaml", Obj: &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(8080)}}}}}
	}
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "echo", Image: "svcnet"}}}}
	ready := pod.DeepCopy()
	ready.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "192.168.1.10", PodIPs: []corev1.PodIP{{IP: "192.168.1.10"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}

	// Every change, on both: the daemon's side and a command's own.
	steps := []struct {
		name string
		do   func(f *File) []error
	}{
		{"register nodes", func(f *File) []error { return []error{f.RegisterNodes(ctx, []*corev1.Node{Node(nil, 1)})} }},
		{"apply", func(f *File) []error {
			return f.Apply(ctx, []controlplane.Object{svc("web", 80), svc("bad", 0), svc("db", 5432)})
		}},
		{"create pod", func(f *File) []error { return []error{f.CreatePod(ctx, pod)} }},
		{"pod status", func(f *File) []error { return []error{f.SetPodStatus(ctx, ready)} }},
		{"terminate pod", func(f *File) []error { return []error{f.TerminatePod(ctx, "default", "web-1", 2)} }},
		{"remove pod", func(f *File) []error { return []error{f.RemovePod(ctx, "default", "web-1")} }},
		{"delete", func(f *File) []error { return []error{f.Delete(ctx, "Service", "default", "db")} }},
		{"delete missing", func(f *File) []error { return []error{f.Delete(ctx, "Service", "default", "nothing")} }},
		{"delete invalid name", func(f *File) []error { return []error{f.Delete(ctx, "Service", "default", "../x")} }},
	}
	texts := func(errs []error) []string {
		var out []string
		for _, e := range errs {
			if e != nil {
				out = append(out, strings.ReplaceAll(e.Error(), local.Lab, served.Lab))
			}
		}
		return out
	}
	requests := 0
	for _, s := range steps {
		got, want := texts(s.do(remote)), texts(s.do(direct))
		if !slices.Equal(got, want) {
			t.Errorf("%s: through the daemon %q, made here %q", s.name, got, want)
		}
		requests++
		if s.name == "apply" {
			var oe *controlplane.ObjectError
			errs := remote.Apply(ctx, []controlplane.Object{svc("bad", 0)})
			if len(errs) != 1 || !errors.As(errs[0], &oe) || oe.Origin != "user/bad.yaml" {
				t.Fatalf("refused object: %v, want an ObjectError from user/bad.yaml", errs)
			}
			direct.Apply(ctx, []controlplane.Object{svc("bad", 0)})
			w, handled, err := remote.NotServed(ctx, []controlplane.Object{svc("web", 80)})
			if !handled || err != nil || !slices.Equal(w, []string{"user/web.yaml: 3 Services held"}) {
				t.Fatalf("notServed: %q, handled %v, %v", w, handled, err)
			}
			requests += 2
		}
		if n := sink.Count("Control-plane request"); n != requests {
			t.Fatalf("%s: the daemon served %d requests, want %d", s.name, n, requests)
		}
		publication := func(n topology.Names) string {
			b, err := os.ReadFile(n.Path("cluster", "cluster.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		// The same objects, allocated the same; the times stamped from
		// the clock (creation, a Pod's deletion, a Node's conditions)
		// are each lab's own, and the two calls may fall in different
		// seconds; so are the journals the headers name.
		stamp := regexp.MustCompile(`"(creationTimestamp|deletionTimestamp|lastHeartbeatTime|lastTransitionTime)":"[^"]*"|(?m)^--- # svcnet-publication .*$`)
		if got, want := stamp.ReplaceAllString(publication(served), ""), stamp.ReplaceAllString(publication(local), ""); got != want {
			t.Errorf("%s: the publications differ:\n%s\n%s", s.name, got, want)
		}
	}

	// The daemon gone, a command makes its changes itself.
	stop()
	if err := <-done; err != nil {
		t.Fatalf("daemon: %v", err)
	}
	stopped = true
	if _, err := os.Stat(ControlPlaneSocket(served)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
	if errs := remote.Apply(ctx, []controlplane.Object{svc("after", 81)}); len(errs) > 0 {
		t.Fatalf("apply without a daemon: %v", errs)
	}
	r, err := remote.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(r.Services, func(s *corev1.Service) bool { return s.Name == "after" }) {
		t.Error("apply without a daemon: not made")
	}
	if _, handled, _ := remote.NotServed(ctx, nil); handled {
		t.Error("notServed without a daemon: handled")
	}
}
