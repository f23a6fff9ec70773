package describe

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// maxAnnotationLen is the length past which an annotation's value goes on
// lines of its own, cut to this length.
const maxAnnotationLen = 140

// labelsBlock writes title and the labels sorted by key, one per line
// aligned after the title ("<none>" when there are none).
func labelsBlock(w writer, title string, labels map[string]string) {
	labelsAt(w, level0, title, labels)
}

// labelsAt is labelsBlock with every write at level, as kubectl indents
// each write of a block nested in another (so a continuation line carries
// the indentation twice).
func labelsAt(w writer, level int, title string, labels map[string]string) {
	w.write(level, "%s:\t", title)
	keys := sortedKeys(labels, "")
	if len(keys) == 0 {
		w.write(level, "<none>\n")
		return
	}
	for i, k := range keys {
		if i > 0 {
			w.write(level, "")
			w.write(level, "\t")
		}
		w.write(level, "%s=%s\n", k, labels[k])
	}
}

// annotationsBlock writes title and the annotations sorted by key, but
// kubectl's last-applied-configuration; a long or multi-line value goes on
// indented lines of its own, each cut at maxAnnotationLen.
func annotationsBlock(w writer, title string, annotations map[string]string) {
	annotationsAt(w, level0, title, annotations)
}

// annotationsAt is annotationsBlock with every write at level (see
// labelsAt).
func annotationsAt(w writer, level int, title string, annotations map[string]string) {
	w.write(level, "%s:\t", title)
	keys := sortedKeys(annotations, corev1.LastAppliedConfigAnnotation)
	if len(keys) == 0 {
		w.write(level, "<none>\n")
		return
	}
	for i, k := range keys {
		if i > 0 {
			w.write(level, "\t")
		}
		v := strings.TrimSuffix(annotations[k], "\n")
		if len(v)+len(k)+2 <= maxAnnotationLen && !strings.Contains(v, "\n") {
			w.write(level, "%s: %s\n", k, v)
			continue
		}
		w.write(level, "%s:\n", k)
		for _, s := range strings.Split(v, "\n") {
			if len(s) > maxAnnotationLen-2 {
				s = s[:maxAnnotationLen-2] + "..."
			}
			w.write(level, "\t  %s\n", s)
		}
	}
}

func sortedKeys(m map[string]string, skip string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != skip {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
