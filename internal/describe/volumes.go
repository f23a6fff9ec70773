package describe

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// volumes writes the pod's volumes: HostPath, EmptyDir, Secret,
// ConfigMap, NFS, PersistentVolumeClaim, GitRepo, DownwardAPI, Ephemeral,
// Projected, CSI and Image ones as kubectl does; any other type (the
// cloud and legacy in-tree ones) as kubectl writes a type it does not
// know: "<unknown>".
func volumes(w writer, vols []corev1.Volume) {
	if len(vols) == 0 {
		w.write(level0, "Volumes:\t<none>\n")
		return
	}
	w.write(level0, "Volumes:\n")
	for _, v := range vols {
		w.write(level1, "%v:\n", v.Name)
		switch src := v.VolumeSource; {
		case src.HostPath != nil:
			typ := "<none>"
			if src.HostPath.Type != nil {
				typ = string(*src.HostPath.Type)
			}
			w.write(level2, "Type:\tHostPath (bare host directory volume)\n"+
				"    Path:\t%v\n    HostPathType:\t%v\n", src.HostPath.Path, typ)
		case src.EmptyDir != nil:
			limit := "<unset>"
			if l := src.EmptyDir.SizeLimit; l != nil && l.Cmp(resource.Quantity{}) > 0 {
				limit = l.String()
			}
			w.write(level2, "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n"+
				"    Medium:\t%v\n    SizeLimit:\t%v\n", src.EmptyDir.Medium, limit)
		case src.Secret != nil:
			w.write(level2, "Type:\tSecret (a volume populated by a Secret)\n"+
				"    SecretName:\t%v\n    Optional:\t%v\n", src.Secret.SecretName, isTrue(src.Secret.Optional))
		case src.ConfigMap != nil:
			w.write(level2, "Type:\tConfigMap (a volume populated by a ConfigMap)\n"+
				"    Name:\t%v\n    Optional:\t%v\n", src.ConfigMap.Name, isTrue(src.ConfigMap.Optional))
		case src.NFS != nil:
			w.write(level2, "Type:\tNFS (an NFS mount that lasts the lifetime of a pod)\n"+
				"    Server:\t%v\n    Path:\t%v\n    ReadOnly:\t%v\n", src.NFS.Server, src.NFS.Path, src.NFS.ReadOnly)
		case src.PersistentVolumeClaim != nil:
			w.write(level2, "Type:\tPersistentVolumeClaim (a reference to a PersistentVolumeClaim in the same namespace)\n"+
				"    ClaimName:\t%v\n    ReadOnly:\t%v\n", src.PersistentVolumeClaim.ClaimName, src.PersistentVolumeClaim.ReadOnly)
		case src.DownwardAPI != nil:
			w.write(level2, "Type:\tDownwardAPI (a volume populated by information about the pod)\n    Items:\n")
			for _, item := range src.DownwardAPI.Items {
				if item.FieldRef != nil {
					w.write(level3, "%v -> %v\n", item.FieldRef.FieldPath, item.Path)
				}
				if item.ResourceFieldRef != nil {
					w.write(level3, "%v -> %v\n", item.ResourceFieldRef.Resource, item.Path)
				}
			}
		case src.GitRepo != nil:
			w.write(level2, "Type:\tGitRepo (a volume that is pulled from git when the pod is created)\n"+
				"    Repository:\t%v\n    Revision:\t%v\n", src.GitRepo.Repository, src.GitRepo.Revision)
		case src.Ephemeral != nil:
			w.write(level2, "Type:\tEphemeralVolume (an inline specification for a volume that gets created and deleted with the pod)\n")
			if t := src.Ephemeral.VolumeClaimTemplate; t != nil {
				claimTemplate(w, t)
			}
		case src.Projected != nil:
			projected(w, src.Projected)
		case src.CSI != nil:
			csi(w, src.CSI)
		case src.Image != nil:
			w.write(level2, "Type:\tImage (a container image or OCI artifact)\n"+
				"    Reference:\t%v\n    PullPolicy:\t%v\n", src.Image.Reference, src.Image.PullPolicy)
		default:
			w.write(level1, "<unknown>\n")
		}
	}
}

// claimTemplate writes an ephemeral volume's claim template as kubectl
// writes a claim from within a volume: every write indented two levels,
// so that continuation lines carry that indentation two or three times.
// A template has no status: no access modes, and a capacity of 0 once
// it names a volume.
func claimTemplate(w writer, t *corev1.PersistentVolumeClaimTemplate) {
	spec := &t.Spec
	class, ok := t.Annotations[corev1.BetaStorageClassAnnotation]
	if !ok {
		class = deref(spec.StorageClassName)
	}
	w.write(level2, "StorageClass:\t%s\n", class)
	w.write(level2, "Volume:\t%s\n", spec.VolumeName)
	labelsAt(w, level2, "Labels", t.Labels)
	annotationsAt(w, level2, "Annotations", t.Annotations)
	capacity := ""
	if spec.VolumeName != "" {
		capacity = "0"
	}
	w.write(level2, "Capacity:\t%s\n", capacity)
	w.write(level2, "Access Modes:\t\n")
	if spec.VolumeMode != nil {
		w.write(level2, "VolumeMode:\t%v\n", *spec.VolumeMode)
	}
	if ds := spec.DataSource; ds != nil {
		w.write(level2, "DataSource:\n")
		if ds.APIGroup != nil {
			w.write(level3, "APIGroup:\t%v\n", *ds.APIGroup)
		}
		w.write(level3, "Kind:\t%v\n", ds.Kind)
		w.write(level3, "Name:\t%v\n", ds.Name)
	}
}

// projected writes a projected volume's secret, downward API, config map
// and service account token sources (others show nothing, as in kubectl).
func projected(w writer, p *corev1.ProjectedVolumeSource) {
	w.write(level2, "Type:\tProjected (a volume that contains injected data from multiple sources)\n")
	for _, s := range p.Sources {
		switch {
		case s.Secret != nil:
			w.write(level2, "SecretName:\t%v\n    Optional:\t%v\n", s.Secret.Name, isTrue(s.Secret.Optional))
		case s.DownwardAPI != nil:
			w.write(level2, "DownwardAPI:\ttrue\n")
		case s.ConfigMap != nil:
			w.write(level2, "ConfigMapName:\t%v\n    Optional:\t%v\n", s.ConfigMap.Name, isTrue(s.ConfigMap.Optional))
		case s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds != nil:
			w.write(level2, "TokenExpirationSeconds:\t%d\n", *s.ServiceAccountToken.ExpirationSeconds)
		}
	}
}

// csi writes a CSI volume: driver, fsType, read-only and its attributes
// sorted by key, each cut at maxAnnotationLen, indented as kubectl does
// (continuation lines carry the level's indentation twice, and each
// attribute once more).
func csi(w writer, c *corev1.CSIVolumeSource) {
	w.write(level2, "Type:\tCSI (a Container Storage Interface (CSI) volume source)\n"+
		"    Driver:\t%v\n    FSType:\t%v\n    ReadOnly:\t%v\n", c.Driver, deref(c.FSType), isTrue(c.ReadOnly))
	w.write(level2, "VolumeAttributes:\t")
	keys := sortedKeys(c.VolumeAttributes, "")
	if len(keys) == 0 {
		w.line("<none>")
		return
	}
	for i, k := range keys {
		if i > 0 {
			w.write(level2, "")
			w.write(level2, "\t")
		}
		if s := k + "=" + c.VolumeAttributes[k]; len(s) > maxAnnotationLen {
			w.write(level2, "%s...\n", s[:maxAnnotationLen])
		} else {
			w.write(level2, "%s\n", s)
		}
	}
}
