package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/controlplane"
	"github.com/svcnet/svcnet/internal/lab/topology"
	"github.com/svcnet/svcnet/internal/source/file"
)

// NotServedFunc decides an apply's warnings from what the control plane
// holds (the lab's NotServed).
type NotServedFunc func(r *controlplane.Result, objs []controlplane.Object) []string

// ServeControlPlane is lab n's control-plane daemon: it listens on
// ControlPlaneSocket(n) (replacing a socket a dead daemon left) and makes
// the changes lab commands send it, one at a time, with a File that keeps
// what it loaded (file.Cache), until ctx ends. A peer of another user is
// refused without being read.
func ServeControlPlane(ctx context.Context, n topology.Names, notServed NotServedFunc, log klog.Logger) error {
	info, err := ReadInfo(n)
	if err != nil {
		return err
	}
	if info.ControlPlane != ControlPlaneFile && info.ControlPlane != "" {
		return fmt.Errorf("lab %s: its control plane is %q; only the embedded one runs as a daemon", n.Lab, info.ControlPlane)
	}
	f := NewFile(n, info.Stack())
	f.cache = file.NewCache()
	sock := ControlPlaneSocket(n)
	if err := os.Remove(sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("control plane: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	// Connecting takes write permission: the owner's alone. The peer's
	// user is checked on every connection besides (checkPeer).
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("control plane: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	log.Info("Serving the embedded control plane", "socket", sock)
	s := &cpServer{f: f, notServed: notServed, log: log, uid: os.Getuid()}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("control plane: %w", err)
		}
		wg.Go(func() { s.serve(ctx, conn) })
	}
}

// cpServer makes the changes of the requests it is sent, one at a time.
type cpServer struct {
	mu        sync.Mutex
	f         *File
	notServed NotServedFunc
	log       klog.Logger
	uid       int
}

func (s *cpServer) serve(ctx context.Context, conn *net.UnixConn) {
	defer conn.Close()
	if err := checkPeer(conn, s.uid); err != nil {
		s.log.Info("Refused a control-plane client", "err", err)
		return
	}
	_ = conn.SetDeadline(time.Now().Add(cpRequestBound))
	var req cpRequest
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&req); err != nil {
		s.log.Info("Unreadable control-plane request", "err", err)
		return
	}
	s.mu.Lock()
	start := time.Now()
	s.f.took = nil
	resp := s.do(ctx, req)
	took := append([]any{"op", req.Op, "objects", len(req.Objects), "errors", len(resp.Errors), "took", time.Since(start)}, s.f.took...)
	s.mu.Unlock()
	s.log.Info("Control-plane request", took...)
	if err := json.NewEncoder(conn).Encode(resp); err != nil {
		s.log.Info("Could not answer a control-plane request", "op", req.Op, "err", err)
	}
}

// checkPeer refuses a peer whose user is not uid, by the kernel's account
// of the peer (SO_PEERCRED).
func checkPeer(conn *net.UnixConn, uid int) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	if int(cred.Uid) != uid {
		return fmt.Errorf("peer pid %d is uid %d, not %d", cred.Pid, cred.Uid, uid)
	}
	return nil
}

// do makes one request's change with the File's own methods.
func (s *cpServer) do(ctx context.Context, req cpRequest) cpResponse {
	objs, err := fromWireObjects(req.Objects)
	if err != nil {
		return cpResponse{Errors: wireErrors([]error{err})}
	}
	one := func(err error) cpResponse { return cpResponse{Errors: wireErrors([]error{err})} }
	f := s.f
	switch req.Op {
	case opApply:
		return cpResponse{Errors: wireErrors(f.apply(objs))}
	case opNotServed:
		r, err := f.Result(ctx)
		if err != nil {
			return one(err)
		}
		return cpResponse{Warnings: s.notServed(r, objs)}
	case opRegisterNodes:
		nodes, err := typed[*corev1.Node](objs)
		if err != nil {
			return one(err)
		}
		return one(f.registerNodes(nodes))
	case opCreatePod, opSetPodStatus:
		pods, err := typed[*corev1.Pod](objs)
		if err != nil {
			return one(err)
		}
		if len(pods) != 1 {
			return one(fmt.Errorf("%s: want one Pod, got %d", req.Op, len(pods)))
		}
		if req.Op == opCreatePod {
			return one(f.createPod(pods[0]))
		}
		return one(f.setPodStatus(pods[0]))
	case opDelete:
		return one(f.delete(req.Kind, req.Namespace, req.Name))
	case opTerminatePod:
		return one(f.terminatePod(ctx, req.Namespace, req.Name, req.Grace))
	case opRemovePod:
		return one(f.removePod(req.Namespace, req.Name))
	}
	return one(fmt.Errorf("control plane: unknown operation %q", req.Op))
}

// typed returns objs as T, or an error naming the first of another kind.
func typed[T any](objs []controlplane.Object) ([]T, error) {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		t, ok := o.Obj.(T)
		if !ok {
			return nil, fmt.Errorf("%s: unexpected %s", o.Origin, KindOf(o.Obj))
		}
		out = append(out, t)
	}
	return out, nil
}
