package cni

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/svcnet/svcnet/internal/cni/hostport"
	"github.com/svcnet/svcnet/internal/cni/ipam"
	"github.com/svcnet/svcnet/internal/cni/link"
	nftnl "github.com/svcnet/svcnet/internal/nft/netlink"
	svcversion "github.com/svcnet/svcnet/internal/version"
)

// Plugin-specific error codes (the spec leaves 100 and up to plugins).
const (
	// ErrHostPortConflict: a hostPort is already mapped to another attachment.
	ErrHostPortConflict uint = 100
	// ErrInterfaceExists: the container already has an interface of the
	// requested name that the plugin did not make.
	ErrInterfaceExists uint = 101
	// ErrCheckFailed: CHECK found the attachment differing from its ADD.
	ErrCheckFailed uint = 102
)

// DefaultTimeout bounds one command.
const DefaultTimeout = time.Minute

// Plugin is svcnet's CNI plugin. Its commands run in the node's network
// namespace: the namespace of the calling thread, which must therefore stay
// on one thread (a runtime's plugin process is entirely in that namespace; a
// test calls the commands inside internal/netns Do).
type Plugin struct {
	// Stdout receives ADD results (os.Stdout when a runtime runs the plugin).
	Stdout io.Writer
	// Timeout bounds one command; DefaultTimeout when zero.
	Timeout time.Duration
}

// New returns a plugin writing results to stdout.
func New(stdout io.Writer) *Plugin { return &Plugin{Stdout: stdout} }

// Funcs returns the plugin's commands for skel.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: p.Add, Del: p.Del, Check: p.Check, GC: p.GC, Status: p.Status}
}

// VersionInfo returns the CNI specification versions the plugin speaks:
// 0.3.0 to 1.1.0, as the reference plugins (CHECK from 0.4.0, GC and STATUS
// from 1.1.0, which skel enforces).
func VersionInfo() version.PluginInfo {
	return version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
}

// About is what the plugin prints on stderr when run without CNI_COMMAND.
func About() string {
	return "svcnet CNI plugin (bridge, host-local IPAM, portmap) " + svcversion.Get().Version
}

// Main runs the plugin as a runtime invokes it (CNI_* environment, netconf on
// stdin, result or error on stdout) and exits non-zero on error.
func Main() {
	skel.PluginMainFuncs(New(os.Stdout).Funcs(), VersionInfo(), About())
}

func (p *Plugin) context() (context.Context, context.CancelFunc) {
	t := p.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	return context.WithTimeout(context.Background(), t)
}

// env is what a command works with, in the node's namespace, under the IPAM
// store's lock (which also serialises the plugin's bridge, veth and nftables
// changes for the network).
type env struct {
	cfg   *Config
	node  *link.Node
	store *ipam.Session
	nftc  *nftnl.Conn
	hp    *hostport.Manager
}

// open takes the store's lock, claims the store for the network (see
// ipam.Session.Claim) and opens the kernel connections.
func open(ctx context.Context, cfg *Config) (*env, error) {
	node, err := link.OpenNode()
	if err != nil {
		return nil, err
	}
	nftc, err := nftnl.New()
	if err != nil {
		node.Close()
		return nil, err
	}
	store, err := ipam.NewStore(cfg.DataDir).Lock(ctx)
	if err != nil {
		nftc.Close()
		node.Close()
		return nil, err
	}
	if err := store.Claim(cfg.Name); err != nil {
		store.Close()
		nftc.Close()
		node.Close()
		return nil, err
	}
	return &env{cfg: cfg, node: node, store: store, nftc: nftc, hp: hostport.NewManager(nftc)}, nil
}

// openFailure returns the CNI error code and reason for an error of open: a
// store of another network is a configuration error (two networks with one
// dataDir), anything else a failure to reach the store or the kernel.
func openFailure(cfg *Config, err error) (uint, string) {
	if errors.Is(err, ipam.ErrForeignStore) {
		return types.ErrInvalidNetworkConfig, "dataDir " + cfg.DataDir + " is another network's IPAM store"
	}
	return types.ErrIOFailure, "cannot open the IPAM store or the node's kernel interfaces"
}

func (e *env) close() {
	e.store.Close()
	e.nftc.Close()
	e.node.Close()
}

func (e *env) hostportOwner(a attachment) hostport.Owner {
	return hostport.Owner{Network: e.cfg.Name, ContainerID: a.ContainerID, IfName: a.IfName}
}

// attachmentError is a CNI error naming the container, its interface and the
// reason; details carry the underlying error.
func attachmentError(code uint, a attachment, reason string, err error) *types.Error {
	msg := fmt.Sprintf("container %s interface %s: %s", a.ContainerID, a.IfName, reason)
	details := ""
	if err != nil {
		details = err.Error()
	}
	return types.NewError(code, msg, details)
}

// networkError is a CNI error naming the network and the reason.
func networkError(code uint, c *Config, reason string, err error) *types.Error {
	details := ""
	if err != nil {
		details = err.Error()
	}
	return types.NewError(code, fmt.Sprintf("network %s: %s", c.Name, reason), details)
}
