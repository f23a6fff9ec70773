package image

import "encoding/binary"

// File capabilities live in the extended attribute security.capability as a
// struct vfs_cap_data (linux/capability.h); a tar layer carries them as the PAX
// record SCHILY.xattr.security.capability, which container runtimes apply when
// they unpack the layer.
const (
	capabilityXattr = "security.capability"
	paxXattrPrefix  = "SCHILY.xattr."
	// maxCapability is CAP_CHECKPOINT_RESTORE, the last one Linux defines.
	maxCapability = 40

	vfsCapRevision2     = 0x02000000
	vfsCapFlagEffective = 0x000001
)

// capabilityValue encodes caps as permitted and effective file capabilities
// (setcap's "=ep"), revision 2 of vfs_cap_data: magic, then permitted and
// inheritable for capabilities 0-31 and 32-63, little-endian.
func capabilityValue(caps []int) string {
	var permitted [2]uint32
	for _, c := range caps {
		permitted[c/32] |= 1 << (c % 32)
	}
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], vfsCapRevision2|vfsCapFlagEffective)
	binary.LittleEndian.PutUint32(b[4:], permitted[0])
	binary.LittleEndian.PutUint32(b[12:], permitted[1])
	return string(b)
}
