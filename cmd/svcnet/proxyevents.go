package main

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/eventlog"
	"github.com/svcnet/svcnet/internal/source/kube"
)

// proxyEventComponent is the source component of svcnet proxy's events.
const proxyEventComponent = "svcnet-proxy"

// eventRecorder returns a recorder of Events about what the proxy does
// not serve, its source this node: written to the cluster (client-go's
// broadcaster: asynchronously, repeats counted), or without a cluster to
// --event-file (as the API server would keep them), or nil without
// either; stop flushes and ends it.
func (o *proxyOptions) eventRecorder(ctx context.Context, node string, log klog.Logger) (r record.EventRecorder, stop func(), err error) {
	source := corev1.EventSource{Component: proxyEventComponent, Host: node}
	if !o.state.cluster() {
		if o.eventFile == "" {
			return nil, func() {}, nil
		}
		return &eventlog.File{Path: o.eventFile, Source: source, OnError: func(err error) {
			log.Error(err, "Recording an event", "eventFile", o.eventFile)
		}}, func() {}, nil
	}
	if o.eventFile != "" {
		return nil, nil, errors.New("--event-file is for --state: with a cluster the events go to its API server")
	}
	client, err := kube.NewClient(o.state.kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	r, stop = eventlog.Cluster(ctx, client, source)
	return r, stop, nil
}
