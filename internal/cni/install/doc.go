// Package install puts svcnet's CNI plugin on a node, as the install
// containers of flannel and Calico do: `svcnet cni install` copies the
// binary into the node's CNI bin dir (as svcnet, and as loopback for
// runtimes that want that plugin), writes the conflist built from the
// Node's pod CIDRs into the CNI conf dir, and records what it wrote;
// `svcnet cni uninstall` removes exactly that.
//
// # Files
//
//	<bin dir>/svcnet            a copy of the running binary (mode 0755)
//	<bin dir>/loopback          a hard link to it, unless another loopback is there
//	<conf dir>/10-svcnet.conflist
//	<conf dir>/svcnet-cni.installed   the manifest: each file with its SHA-256
//
// # Contracts
//
//   - Atomic: every file is written under a temporary name in its own
//     directory and renamed into place, so a runtime reads the old or the new
//     file, never a torn one; the binaries land before the conflist.
//   - Idempotent: a file that already has the content is not written (its
//     inode and mtime stay), so an install with unchanged input writes
//     nothing at all, manifest included.
//   - Exact: uninstall removes a recorded file only while it holds content
//     the installer wrote there (its hash is in the manifest); a file someone
//     replaced since, a file the installer never wrote, another plugin's
//     loopback are left alone and reported. Without a manifest nothing is
//     removed. A manifest whose entries are not directly in the two
//     directories is refused whole.
//   - Serialised: install and uninstall hold an exclusive flock on the conf
//     dir, so two installers on a node (an old and a new Pod during a
//     rollout) take turns and the manifest always matches the files.
//   - The Node decides: its spec.podCIDRs (validated: canonical CIDRs, one
//     per family) become the plugin's subnets; the installer waits, bounded,
//     for a new Node to get them; its status.nodeInfo.containerRuntimeVersion
//     chooses the conflist's cniVersion (ChooseCNIVersion). Errors name the
//     Node and the reason.
package install
