package cluster

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/controlplane"
)

// The File's changes: each is sent to the lab's control-plane daemon when
// the File has one (Attach) and it listens, and made here otherwise.

// Attach makes c send its changes to the control-plane daemon at sock
// (ControlPlaneSocket) while one listens there.
func (c *File) Attach(sock string) { c.sock = sock }

// remote sends req to the daemon; handled is false when there is none
// listening, and the caller makes the change itself.
func (c *File) remote(ctx context.Context, req cpRequest, encErr error) (resp *cpResponse, handled bool, err error) {
	if c.sock == "" {
		return nil, false, nil
	}
	if encErr != nil {
		return nil, true, encErr
	}
	resp, err = call(ctx, c.sock, req)
	if errors.Is(err, errNoDaemon) {
		return nil, false, nil
	}
	return resp, true, err
}

// remoteErr is remote for an operation that returns one error.
func (c *File) remoteErr(ctx context.Context, req cpRequest, encErr error) (handled bool, err error) {
	resp, handled, err := c.remote(ctx, req, encErr)
	if !handled || err != nil {
		return handled, err
	}
	return true, resp.err()
}

func (c *File) RegisterNodes(ctx context.Context, nodes []*corev1.Node) error {
	req, encErr := objectsRequest(opRegisterNodes, nodes...)
	if handled, err := c.remoteErr(ctx, req, encErr); handled {
		return err
	}
	return c.registerNodes(nodes)
}

func (c *File) Apply(ctx context.Context, objs []controlplane.Object) []error {
	ws, encErr := toWireObjects(objs)
	resp, handled, err := c.remote(ctx, cpRequest{Op: opApply, Objects: ws}, encErr)
	switch {
	case !handled:
		return c.apply(objs)
	case err != nil:
		return []error{err}
	}
	return resp.errs()
}

func (c *File) Delete(ctx context.Context, kind, namespace, name string) error {
	if handled, err := c.remoteErr(ctx, cpRequest{Op: opDelete, Kind: kind, Namespace: namespace, Name: name}, nil); handled {
		return err
	}
	return c.delete(kind, namespace, name)
}

func (c *File) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	req, encErr := objectsRequest(opCreatePod, pod)
	if handled, err := c.remoteErr(ctx, req, encErr); handled {
		return err
	}
	return c.createPod(pod)
}

func (c *File) SetPodStatus(ctx context.Context, pod *corev1.Pod) error {
	req, encErr := objectsRequest(opSetPodStatus, pod)
	if handled, err := c.remoteErr(ctx, req, encErr); handled {
		return err
	}
	return c.setPodStatus(pod)
}

func (c *File) TerminatePod(ctx context.Context, namespace, name string, grace int64) error {
	req := cpRequest{Op: opTerminatePod, Namespace: namespace, Name: name, Grace: grace}
	if handled, err := c.remoteErr(ctx, req, nil); handled {
		return err
	}
	return c.terminatePod(ctx, namespace, name, grace)
}

func (c *File) RemovePod(ctx context.Context, namespace, name string) error {
	if handled, err := c.remoteErr(ctx, cpRequest{Op: opRemovePod, Namespace: namespace, Name: name}, nil); handled {
		return err
	}
	return c.removePod(namespace, name)
}

// NotServed asks the daemon for the warnings of an apply of objs (see
// ServeControlPlane's notServed); handled is false when there is no daemon.
func (c *File) NotServed(ctx context.Context, objs []controlplane.Object) (warnings []string, handled bool, err error) {
	ws, encErr := toWireObjects(objs)
	resp, handled, err := c.remote(ctx, cpRequest{Op: opNotServed, Objects: ws}, encErr)
	if !handled || err != nil {
		return nil, handled, err
	}
	return resp.Warnings, true, resp.err()
}
