package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/source/file"
)

// A file-mode lab runs its embedded control plane as a daemon (svcnet lab
// control-plane, see ServeControlPlane) that keeps what it loaded from one
// change to the next: the decoded manifests, the Reconciler's memory and the
// last publication. A lab command that changes the cluster sends the change
// to it over a Unix socket instead of loading objects/ itself: with 10,000
// Services, a change made in a new process costs about 0.3 s of loading,
// reconciling and publishing; the daemon's, 80 to 100 ms on a quiet
// machine. The daemon runs the same File methods a command would, and a
// command whose daemon is not listening (a lab made by an older svcnet, a
// daemon restarting) runs them itself: the files are the truth either way,
// and each side sees the other's writes by the files' identities.
//
// The socket is the lab's, root's, mode 0600; the daemon serves only a
// peer of its own user (SO_PEERCRED). The caller holds the lab's lock, as
// for every change, so requests never overlap changes made in place.

// ControlPlaneSocket is where lab n's control-plane daemon listens.
func ControlPlaneSocket(n interface{ Path(...string) string }) string {
	return n.Path("control-plane.sock")
}

// cpRequestBound bounds one request: applying 10,000 objects takes about
// 10 s.
const cpRequestBound = 5 * time.Minute

// Operations of the control-plane daemon: the ControlPlane methods that
// change the cluster, and the warnings of an apply.
const (
	opRegisterNodes = "registerNodes"
	opApply         = "apply"
	opDelete        = "delete"
	opCreatePod     = "createPod"
	opSetPodStatus  = "setPodStatus"
	opTerminatePod  = "terminatePod"
	opRemovePod     = "removePod"
	opNotServed     = "notServed"
)

// cpRequest is one request: an operation and its arguments.
type cpRequest struct {
	Op      string       `json:"op"`
	Objects []wireObject `json:"objects,omitempty"`
	// Kind, Namespace and Name name the object of delete and of the Pod
	// operations by name; Grace is terminatePod's grace period (seconds).
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Grace     int64  `json:"grace,omitempty"`
}

// cpResponse is the answer: the operation's errors, and notServed's lines.
type cpResponse struct {
	Errors   []wireError `json:"errors,omitempty"`
	Warnings []string    `json:"warnings,omitempty"`
}

// wireObject is an object with where the user wrote it, as JSON with its
// apiVersion and kind.
type wireObject struct {
	Origin string          `json:"origin,omitempty"`
	Object json.RawMessage `json:"object"`
}

// wireError carries an error so that the caller's copy prints as the
// original and is still an ObjectError or DocError where it was one
// (WithOrigin and the apply's report rely on that).
type wireError struct {
	Type      string `json:"type,omitempty"` // "object", "doc" or ""
	Origin    string `json:"origin,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Message   string `json:"message"`
}

func toWireError(err error) wireError {
	var oe *controlplane.ObjectError
	if errors.As(err, &oe) && oe.Error() == err.Error() {
		return wireError{Type: "object", Origin: oe.Origin, Kind: oe.Kind, Namespace: oe.Namespace, Name: oe.Name, Message: oe.Err.Error()}
	}
	var de *file.DocError
	if errors.As(err, &de) && de.Error() == err.Error() {
		return wireError{Type: "doc", Origin: de.Origin, Message: de.Err.Error()}
	}
	return wireError{Message: err.Error()}
}

func (w wireError) err() error {
	switch w.Type {
	case "object":
		return &controlplane.ObjectError{Origin: w.Origin, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, Err: errors.New(w.Message)}
	case "doc":
		return &file.DocError{Origin: w.Origin, Err: errors.New(w.Message)}
	}
	return errors.New(w.Message)
}

func wireErrors(errs []error) []wireError {
	var out []wireError
	for _, e := range errs {
		if e != nil {
			out = append(out, toWireError(e))
		}
	}
	return out
}

func (r *cpResponse) errs() []error {
	var out []error
	for _, w := range r.Errors {
		out = append(out, w.err())
	}
	return out
}

// err is the response's one error, for the operations that return one.
func (r *cpResponse) err() error { return errors.Join(r.errs()...) }

func toWireObjects(objs []controlplane.Object) ([]wireObject, error) {
	out := make([]wireObject, 0, len(objs))
	for _, o := range objs {
		b, err := file.EncodeJSON(o.Obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Origin, err)
		}
		out = append(out, wireObject{Origin: o.Origin, Object: b})
	}
	return out, nil
}

var wireDecoder = serializer.NewCodecFactory(file.Scheme).UniversalDeserializer()

func fromWireObjects(ws []wireObject) ([]controlplane.Object, error) {
	out := make([]controlplane.Object, 0, len(ws))
	for _, w := range ws {
		obj, _, err := wireDecoder.Decode(w.Object, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: decoding the request: %w", w.Origin, err)
		}
		out = append(out, controlplane.Object{Origin: w.Origin, Obj: obj})
	}
	return out, nil
}

// errNoDaemon is a call that found no daemon listening: the caller does
// the work itself.
var errNoDaemon = errors.New("no control-plane daemon")

// call sends req to the daemon at sock and returns its response;
// errNoDaemon when none listens there. Once the request is sent, any
// failure is an error of its own: the daemon may have done part of the
// work, so the caller must not do it again.
func call(ctx context.Context, sock string, req cpRequest) (*cpResponse, error) {
	if sock == "" {
		return nil, errNoDaemon
	}
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, errNoDaemon
		}
		return nil, fmt.Errorf("control plane at %s: %w", sock, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(cpRequestBound)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return nil, fmt.Errorf("control plane at %s: sending %s: %w", sock, req.Op, err)
	}
	var resp cpResponse
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&resp); err != nil {
		return nil, fmt.Errorf("control plane at %s: %s: no answer: %w", sock, req.Op, err)
	}
	return &resp, nil
}

// objectsRequest is a request carrying objects.
func objectsRequest[T runtime.Object](op string, objs ...T) (cpRequest, error) {
	cps := make([]controlplane.Object, len(objs))
	for i, o := range objs {
		cps[i] = controlplane.Object{Obj: o}
	}
	ws, err := toWireObjects(cps)
	return cpRequest{Op: op, Objects: ws}, err
}
