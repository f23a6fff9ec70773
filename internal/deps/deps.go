// Package deps pins the modules the tree is about to use, until real imports do.
// It is removed once every module below is imported by real code.
package deps

import (
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/spf13/cobra"
	_ "k8s.io/apimachinery/pkg/util/validation/field"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "k8s.io/client-go/tools/cache"
	_ "k8s.io/klog/v2"
	_ "sigs.k8s.io/yaml"
)
