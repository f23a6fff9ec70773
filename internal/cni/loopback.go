package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/svcnet/svcnet/internal/cni/link"
	svcversion "github.com/svcnet/svcnet/internal/version"
)

// LoopbackType is the plugin type, and the file name in CNI_PATH, under which
// the svcnet binary is the loopback plugin. Runtimes that do not bring a
// pod's lo up themselves (containerd 1.6, and 2.x without
// use_internal_loopback) run a plugin of this name for every sandbox.
const LoopbackType = "loopback"

// IsLoopbackName reports whether argv0, the name the binary was run under,
// makes it the loopback plugin: a file named loopback (a copy, hard link or
// symlink of svcnet in a CNI_PATH directory).
func IsLoopbackName(argv0 string) bool {
	return filepath.Base(argv0) == LoopbackType
}

// Loopback is the loopback plugin, as the reference one
// (containernetworking/plugins plugins/main/loopback) behaves:
//
//   - ADD sets lo up in CNI_NETNS (CNI_IFNAME is ignored: it is always lo)
//     and fails if lo holds an address that is not a loopback address. The
//     result is prevResult when one is given, else lo (MAC all zero, the
//     sandbox) with its first IPv4 and first IPv6 address, in the
//     configuration's cniVersion.
//   - DEL sets lo down; an empty CNI_NETNS or a namespace that is gone is
//     success (as svcnet's DEL, see netNSForDel).
//   - CHECK fails (code ErrCheckFailed) when lo is down.
//   - GC and STATUS do nothing and succeed; every CNI version is spoken.
//
// Beyond the reference, CNI_NETNS is checked as svcnet's plugin checks it
// (canonical absolute path, a network namespace before it is opened; code 4
// or 8).
type Loopback struct {
	// Stdout receives ADD results.
	Stdout io.Writer
}

// Funcs returns the loopback plugin's commands for skel.
func (l *Loopback) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: l.Add, Del: l.Del, Check: l.Check}
}

// LoopbackMain runs the loopback plugin as a runtime invokes it and exits
// non-zero on error.
func LoopbackMain() {
	about := "loopback CNI plugin (svcnet " + svcversion.Get().Version + ")"
	skel.PluginMainFuncs((&Loopback{Stdout: os.Stdout}).Funcs(), version.All, about)
}

// loopbackConf parses the configuration as the reference plugin does: any
// fields, and prevResult when present (converted to the current version).
func loopbackConf(data []byte) (*types.PluginConf, error) {
	conf := &types.PluginConf{}
	if err := json.Unmarshal(data, conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "cannot decode network configuration", err.Error())
	}
	if conf.RawPrevResult != nil {
		if err := version.ParsePrevResult(conf); err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "cannot decode prevResult", err.Error())
		}
		if _, err := types100.NewResultFromResult(conf.PrevResult); err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "cannot convert prevResult", err.Error())
		}
	}
	return conf, nil
}

// loopbackError is a CNI error naming the namespace and the reason.
func loopbackError(code uint, netnsPath, reason string, err error) *types.Error {
	details := ""
	if err != nil {
		details = err.Error()
	}
	return types.NewError(code, fmt.Sprintf("loopback in %s: %s", netnsPath, reason), details)
}

// Add sets lo up in CNI_NETNS and prints the result.
func (l *Loopback) Add(args *skel.CmdArgs) error {
	conf, err := loopbackConf(args.StdinData)
	if err != nil {
		return err
	}
	if err := validateNetNS(args.Netns, true); err != nil {
		return err
	}
	lo, err := link.SetLoopback(args.Netns, true)
	if errors.Is(err, link.ErrNetNS) {
		return loopbackError(types.ErrInvalidNetNS, args.Netns, "CNI_NETNS is not a network namespace", err)
	}
	if err != nil {
		return loopbackError(types.ErrInternal, args.Netns, "cannot set lo up", err)
	}
	var v4, v6 *net.IPNet
	for _, p := range lo.Addrs {
		if !p.Addr().IsLoopback() {
			return loopbackError(types.ErrInternal, args.Netns, "lo has the non-loopback address "+p.String(), nil)
		}
		n := &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
		if p.Addr().Is4() && v4 == nil {
			v4 = n
		} else if p.Addr().Is6() && v6 == nil {
			v6 = n
		}
	}
	var result types.Result = conf.PrevResult
	if result == nil {
		r := &types100.Result{
			CNIVersion: conf.CNIVersion,
			Interfaces: []*types100.Interface{{Name: "lo", Mac: "00:00:00:00:00:00", Sandbox: args.Netns}},
		}
		for _, n := range []*net.IPNet{v4, v6} {
			if n != nil {
				r.IPs = append(r.IPs, &types100.IPConfig{Interface: types100.Int(0), Address: *n})
			}
		}
		result = r
	}
	out, err := result.GetAsVersion(conf.CNIVersion)
	if err != nil {
		return loopbackError(types.ErrIncompatibleCNIVersion, args.Netns, "cannot convert the result to version "+conf.CNIVersion, err)
	}
	return out.PrintTo(l.Stdout)
}

// Del sets lo down in CNI_NETNS, if that namespace is still there.
func (l *Loopback) Del(args *skel.CmdArgs) error {
	if _, err := loopbackConf(args.StdinData); err != nil {
		return err
	}
	if err := validateNetNS(args.Netns, false); err != nil {
		return err
	}
	netnsPath, problem := netNSForDel(args.Netns)
	if problem != "" {
		return loopbackError(types.ErrInvalidNetNS, args.Netns, problem, nil)
	}
	if netnsPath == "" {
		return nil
	}
	_, err := link.SetLoopback(netnsPath, false)
	if err != nil && errors.Is(err, fs.ErrNotExist) {
		return nil // removed since it was checked
	}
	if err != nil {
		return loopbackError(types.ErrInternal, args.Netns, "cannot set lo down", err)
	}
	return nil
}

// Check fails when lo in CNI_NETNS is down.
func (l *Loopback) Check(args *skel.CmdArgs) error {
	if _, err := loopbackConf(args.StdinData); err != nil {
		return err
	}
	if err := validateNetNS(args.Netns, true); err != nil {
		return err
	}
	lo, err := link.InspectLoopback(args.Netns)
	if errors.Is(err, link.ErrNetNS) {
		return loopbackError(types.ErrInvalidNetNS, args.Netns, "CNI_NETNS is not a network namespace", err)
	}
	if err != nil {
		return loopbackError(types.ErrInternal, args.Netns, "cannot read lo", err)
	}
	if !lo.Info.Up {
		return loopbackError(ErrCheckFailed, args.Netns, "loopback interface is down", nil)
	}
	return nil
}
