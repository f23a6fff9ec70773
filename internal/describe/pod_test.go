package describe

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The golden files in testdata are kubectl v0.36.3's own describers'
// output (PodDescriber, NodeDescriber on client-go's fake clientset) for
// the objects the fixtures below build, written by the program in
// /tmp/kdesc (see its README): it copies the code between the
// fixtures:begin and fixtures:end lines of this file and node_test.go,
// builds the objects at the second it runs, and records that second in
// testdata/now, which the tests read as now, so that ages agree.

// testNow is the time the golden files were written at.
func testNow(t *testing.T) time.Time {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "now"))
	if err != nil {
		t.Fatal(err)
	}
	now, err := time.Parse(time.RFC3339, strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return now.UTC()
}

// checkGolden fails t unless got is testdata/name, byte for byte.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs from kubectl's (-kubectl +ours):\n%s", name, cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")))
	}
}

func TestPod(t *testing.T) {
	now := testNow(t)
	for _, c := range podCases(now) {
		t.Run(c.golden, func(t *testing.T) {
			before := c.pod.DeepCopy()
			checkGolden(t, c.golden, Pod(c.pod, shown(c.events), now))
			if diff := cmp.Diff(before, c.pod); diff != "" {
				t.Errorf("Pod changed its pod (-before +after):\n%s", diff)
			}
		})
	}
}

func TestPodTerminatingAge(t *testing.T) {
	now := testNow(t)
	pod := terminatingPod(now)
	if got := Pod(pod, nil, now.Add(time.Hour)); !regexp.MustCompile(`(?m)^Status: +Terminating \(lasts 66m\)$`).MatchString(got) {
		t.Errorf("deletion age not counted from now:\n%s", got)
	}
	pod.Status.Phase = corev1.PodFailed
	if got := Pod(pod, nil, now); !regexp.MustCompile(`(?m)^Status: +Failed$`).MatchString(got) {
		t.Errorf("a failed pod being deleted is not shown Failed:\n%s", got)
	}
}

// Volume types kubectl knows but Pod does not show as kubectl's "<unknown>".
func TestPodUnknownVolume(t *testing.T) {
	pod := pendingPod(testNow(t))
	pod.Spec.Volumes = []corev1.Volume{{Name: "flex", VolumeSource: corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "example.com/flex"}}}}
	if got := Pod(pod, nil, testNow(t)); !strings.Contains(got, "\nVolumes:\n  flex:\n  <unknown>\nQoS Class:") {
		t.Errorf("got\n%s", got)
	}
}

func TestFieldRefValue(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", Labels: map[string]string{"a": "b"}}}
	for path, want := range map[string]string{
		"metadata.name": "p", "metadata.namespace": "ns", "metadata.uid": "", "metadata.labels['a']": "", "spec.nodeName": "",
	} {
		if got := fieldRefValue(pod, &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	if got := fieldRefValue(pod, &corev1.ObjectFieldSelector{APIVersion: "a/b/c", FieldPath: "metadata.name"}); got != "" {
		t.Errorf("bad apiVersion resolved to %q", got)
	}
}

// fixtures:begin

// podCase is a pod, its events and the golden file of its description.
type podCase struct {
	golden string
	pod    *corev1.Pod
	events []corev1.Event
}

func podCases(now time.Time) []podCase {
	running := runningPod(now)
	terminating := terminatingPod(now)
	cases := []podCase{
		{"pod_running.txt", running, podEvents(now, running)},
		{"pod_terminating.txt", terminating, terminatingEvents(now, terminating)},
		{"pod_pending.txt", pendingPod(now), nil},
	}
	for _, p := range qosPods(now) {
		cases = append(cases, podCase{"pod_" + p.Name + ".txt", p, nil})
	}
	return cases
}

func ptrTo[T any](v T) *T { return &v }

func qty(s string) resource.Quantity { return resource.MustParse(s) }

// resourceList is a resource list of name, quantity pairs.
func resourceList(pairs ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		l[corev1.ResourceName(pairs[i])] = qty(pairs[i+1])
	}
	return l
}

// defaultTolerations are those the DefaultTolerationSeconds admission
// plugin gives every pod.
func defaultTolerations() []corev1.Toleration {
	return []corev1.Toleration{
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrTo[int64](300)},
		{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrTo[int64](300)},
	}
}

// apiAccessVolume is the service account token volume the API server
// adds to a pod.
func apiAccessVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptrTo[int32](420),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptrTo[int64](3607), Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}},
			}}},
		},
	}}}
}

func apiAccessMount(name string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}
}

// container is a container with the API server's defaults.
func container(name, image string) corev1.Container {
	return corev1.Container{
		Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
}

func podConditions(now time.Time, ready corev1.ConditionStatus) []corev1.PodCondition {
	at := metav1.NewTime(now.Add(-50 * time.Hour))
	return []corev1.PodCondition{
		{Type: "PodReadyToStartContainers", Status: corev1.ConditionTrue, LastTransitionTime: at},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at},
		{Type: corev1.PodReady, Status: ready, LastTransitionTime: at},
		{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: at},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at},
	}
}

// runningPod is a Deployment's pod as the API server returns it, with a
// restartable (sidecar) and a regular init container and two containers.
func runningPod(now time.Time) *corev1.Pod {
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	web := container("web", "nginx:1.27")
	web.Args = []string{"--config=/etc/web/web.conf", "--banner=hello\nworld"}
	web.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}}
	web.EnvFrom = []corev1.EnvFromSource{
		{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-env"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-secrets"}, Optional: ptrTo(true)}},
	}
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
	}
	web.Env = []corev1.EnvVar{
		{Name: "MODE", Value: "production"},
		{Name: "MOTD", Value: "first line\nsecond line"},
		{Name: "POD_NAME", ValueFrom: field("metadata.name")},
		{Name: "POD_NAMESPACE", ValueFrom: field("metadata.namespace")},
		{Name: "POD_UID", ValueFrom: field("metadata.uid")},
		{Name: "NODE_NAME", ValueFrom: field("spec.nodeName")},
		{Name: "POD_IP", ValueFrom: field("status.podIP")},
		{Name: "APP", ValueFrom: field("metadata.labels['app']")},
		{Name: "MEM_LIMIT_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: qty("1Mi")}}},
		{Name: "CPU_REQUEST_M", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: qty("1m")}}},
		{Name: "CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: qty("1")}}},
		{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
		{Name: "FEATURES", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "web-env"}, Key: "features", Optional: ptrTo(true)}}},
	}
	web.Resources = corev1.ResourceRequirements{
		Requests: resourceList("cpu", "250m", "memory", "128Mi", "example.com/gpu", "1"),
		Limits:   resourceList("cpu", "500m", "memory", "256Mi", "example.com/gpu", "1"),
	}
	web.LivenessProbe = &corev1.Probe{
		ProbeHandler:   corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3, InitialDelaySeconds: 5,
	}
	web.ReadinessProbe = &corev1.Probe{
		ProbeHandler:   corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
		TimeoutSeconds: 1, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3,
	}
	web.StartupProbe = &corev1.Probe{
		ProbeHandler:   corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/started"}}},
		TimeoutSeconds: 1, PeriodSeconds: 2, SuccessThreshold: 1, FailureThreshold: 30,
	}
	web.SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	web.VolumeMounts = []corev1.VolumeMount{
		{Name: "config", ReadOnly: true, MountPath: "/etc/web"},
		{Name: "cache", MountPath: "/var/cache/web"},
		{Name: "tls", ReadOnly: true, MountPath: "/etc/tls"},
		{Name: "host-logs", MountPath: "/var/log/web", SubPath: "web"},
		{Name: "podinfo", ReadOnly: true, MountPath: "/etc/podinfo"},
		apiAccessMount("kube-api-access-x2x9k"),
	}

	proxy := container("proxy", "envoyproxy/envoy:v1.31.0")
	proxy.Command = []string{"envoy", "-c", "/etc/envoy/envoy.yaml"}
	proxy.Ports = []corev1.ContainerPort{{Name: "admin", ContainerPort: 15000, HostPort: 15000, Protocol: corev1.ProtocolTCP}}
	proxy.Resources = corev1.ResourceRequirements{
		Requests: resourceList("cpu", "100m", "memory", "64Mi", "hugepages-2Mi", "32Mi"),
		Limits:   resourceList("memory", "128Mi", "hugepages-2Mi", "32Mi"),
	}
	proxy.ReadinessProbe = &corev1.Probe{
		ProbeHandler:   corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 15021, Service: ptrTo("")}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
	}
	proxy.Env = []corev1.EnvVar{{Name: "CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "proxy", Resource: "limits.cpu", Divisor: qty("1")}}}}
	proxy.VolumeMounts = []corev1.VolumeMount{apiAccessMount("kube-api-access-x2x9k")}

	shipper := container("log-shipper", "fluent/fluent-bit:3.1")
	shipper.RestartPolicy = ptrTo(corev1.ContainerRestartPolicyAlways)
	shipper.Resources = corev1.ResourceRequirements{Requests: resourceList("cpu", "50m", "memory", "32Mi"), Limits: resourceList("memory", "64Mi")}
	shipper.VolumeMounts = []corev1.VolumeMount{{Name: "host-logs", ReadOnly: true, MountPath: "/logs"}, apiAccessMount("kube-api-access-x2x9k")}

	migrate := container("migrate", "registry.example.com/shop/migrate:2.4.1")
	migrate.Command = []string{"sh", "-c", "migrate up\necho done"}
	migrate.Resources = corev1.ResourceRequirements{Requests: resourceList("cpu", "100m", "memory", "256Mi")}
	migrate.VolumeMounts = []corev1.VolumeMount{apiAccessMount("kube-api-access-x2x9k")}

	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-7d4b9c6f5-x2x9k", GenerateName: "web-7d4b9c6f5-", Namespace: "shop",
			UID: "6f1c0d3e-2b7a-4c55-9a41-0e8f3b1d2c11", ResourceVersion: "48213",
			CreationTimestamp: ago(50 * time.Hour),
			Labels:            map[string]string{"app": "web", "pod-template-hash": "7d4b9c6f5", "tier": "frontend"},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/restartedAt": "2025-01-01T10:00:00Z",
				"example.com/description":           strings.Repeat("a very long annotation value ", 6),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c6f5",
				UID: "0b6f8a52-5c4e-4f0e-8d0c-8f7e3a9b1c22", Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true),
			}},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}, DefaultMode: ptrTo[int32](420)}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web-tls", DefaultMode: ptrTo[int32](420), Optional: ptrTo(true)}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptrTo(qty("64Mi"))}}},
				{Name: "host-logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log/pods-web", Type: ptrTo(corev1.HostPathDirectoryOrCreate)}}},
				{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
					DefaultMode: ptrTo[int32](420),
					Items: []corev1.DownwardAPIVolumeFile{
						{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}},
						{Path: "cpu_limit", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "web", Resource: "limits.cpu", Divisor: qty("1m")}},
					},
				}}},
				apiAccessVolume("kube-api-access-x2x9k"),
			},
			InitContainers:                []corev1.Container{shipper, migrate},
			Containers:                    []corev1.Container{web, proxy},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptrTo[int64](30),
			DNSPolicy:                     corev1.DNSClusterFirst,
			NodeSelector:                  map[string]string{"kubernetes.io/os": "linux"},
			ServiceAccountName:            "web",
			DeprecatedServiceAccount:      "web",
			NodeName:                      "cp-1",
			SecurityContext:               &corev1.PodSecurityContext{},
			SchedulerName:                 corev1.DefaultSchedulerName,
			Tolerations:                   append([]corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectNoSchedule}}, defaultTolerations()...),
			Priority:                      ptrTo[int32](0),
			EnableServiceLinks:            ptrTo(true),
			PreemptionPolicy:              ptrTo(corev1.PreemptLowerPriority),
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
				{MaxSkew: 2, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule},
			},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: podConditions(now, corev1.ConditionTrue),
			HostIP:     "172.18.0.2", HostIPs: []corev1.HostIP{{IP: "172.18.0.2"}},
			PodIP: "10.244.0.17", PodIPs: []corev1.PodIP{{IP: "10.244.0.17"}, {IP: "fd00:10:244::11"}},
			StartTime: ptrTo(ago(50 * time.Hour)),
			InitContainerStatuses: []corev1.ContainerStatus{
				{
					Name: "log-shipper", Ready: true, Started: ptrTo(true), RestartCount: 0,
					State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(50*time.Hour - 20*time.Second)}},
					Image:       "docker.io/fluent/fluent-bit:3.1",
					ImageID:     "docker.io/fluent/fluent-bit@sha256:4d0e9f2a3c7b1e5d6f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e",
					ContainerID: "containerd://a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90",
					Resources:   &corev1.ResourceRequirements{Requests: resourceList("cpu", "50m", "memory", "32Mi"), Limits: resourceList("memory", "64Mi")},
				},
				{
					Name: "migrate", Ready: true, Started: ptrTo(false),
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						ExitCode: 0, Reason: "Completed", StartedAt: ago(50*time.Hour - 25*time.Second), FinishedAt: ago(50*time.Hour - 40*time.Second),
						ContainerID: "containerd://b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1",
					}},
					Image:       "registry.example.com/shop/migrate:2.4.1",
					ImageID:     "registry.example.com/shop/migrate@sha256:5e1f0a3b4c8d2f6e7a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f",
					ContainerID: "containerd://b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1",
				},
			},
			ContainerStatuses: []corev1.ContainerStatus{
				{
					Name: "proxy", Ready: true, Started: ptrTo(true), RestartCount: 2,
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(3 * time.Hour)}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						ExitCode: 137, Signal: 9, Reason: "OOMKilled", Message: "container exceeded its memory limit",
						StartedAt: ago(5 * time.Hour), FinishedAt: ago(3*time.Hour + 5*time.Second),
						ContainerID: "containerd://c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2",
					}},
					Image:              "docker.io/envoyproxy/envoy:v1.31.0",
					ImageID:            "docker.io/envoyproxy/envoy@sha256:6f2a1b4c5d9e3a7f8b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a",
					ContainerID:        "containerd://d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3",
					AllocatedResources: resourceList("cpu", "100m", "memory", "64Mi", "hugepages-2Mi", "32Mi"),
					Resources: &corev1.ResourceRequirements{
						Requests: resourceList("cpu", "100m", "memory", "64Mi", "hugepages-2Mi", "32Mi"),
						Limits:   resourceList("memory", "128Mi", "hugepages-2Mi", "32Mi"),
					},
				},
				{
					Name: "web", Ready: true, Started: ptrTo(true),
					State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(50*time.Hour - 45*time.Second)}},
					Image:       "docker.io/library/nginx:1.27",
					ImageID:     "docker.io/library/nginx@sha256:7a3b2c5d6e0f4b8a9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b",
					ContainerID: "containerd://e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4",
					// Resized in place: actuated requests above the spec's.
					AllocatedResources: resourceList("cpu", "300m", "memory", "128Mi", "example.com/gpu", "1"),
					Resources: &corev1.ResourceRequirements{
						Requests: resourceList("cpu", "300m", "memory", "160Mi", "example.com/gpu", "1"),
						Limits:   resourceList("cpu", "600m", "memory", "256Mi", "example.com/gpu", "1"),
					},
				},
			},
			QOSClass: corev1.PodQOSBurstable,
		},
	}
}

// event is an event about obj (a pod or node) at path, from component,
// seen count times between first and last ago.
func event(now time.Time, obj metav1.Object, kind, path, typ, reason, component, msg string, count int32, first, last time.Duration) corev1.Event {
	ns := obj.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: obj.GetName() + "." + reason, Namespace: ns},
		InvolvedObject: corev1.ObjectReference{
			Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(), APIVersion: "v1", FieldPath: path,
		},
		Reason: reason, Message: msg, Type: typ, Count: count,
		Source:         corev1.EventSource{Component: component},
		FirstTimestamp: metav1.NewTime(now.Add(-first)),
		LastTimestamp:  metav1.NewTime(now.Add(-last)),
	}
}

// podEvents are the scheduler's (an events.k8s.io event: event time, no
// timestamps) and the kubelet's events about pod.
func podEvents(now time.Time, pod *corev1.Pod) []corev1.Event {
	scheduled := event(now, pod, "Pod", "", corev1.EventTypeNormal, "Scheduled", "", "Successfully assigned shop/web-7d4b9c6f5-x2x9k to cp-1", 0, 0, 0)
	scheduled.FirstTimestamp, scheduled.LastTimestamp = metav1.Time{}, metav1.Time{}
	scheduled.EventTime = metav1.NewMicroTime(now.Add(-50*time.Hour - 3*time.Second))
	scheduled.ReportingController, scheduled.ReportingInstance, scheduled.Action = "default-scheduler", "default-scheduler-cp-1", "Binding"
	return []corev1.Event{
		event(now, pod, "Pod", "spec.containers{web}", corev1.EventTypeWarning, "Unhealthy", "kubelet",
			"Readiness probe failed: dial tcp 10.244.0.17:8080: connect: connection refused\n", 5, 49*time.Hour, 7*time.Minute+30*time.Second),
		scheduled,
		event(now, pod, "Pod", "spec.initContainers{migrate}", corev1.EventTypeNormal, "Pulled", "kubelet",
			`Container image "registry.example.com/shop/migrate:2.4.1" already present on machine`, 1, 50*time.Hour-10*time.Second, 50*time.Hour-10*time.Second),
		event(now, pod, "Pod", "spec.containers{proxy}", corev1.EventTypeWarning, "BackOff", "kubelet",
			"Back-off restarting failed container proxy in pod web-7d4b9c6f5-x2x9k_shop(6f1c0d3e-2b7a-4c55-9a41-0e8f3b1d2c11)", 3, 95*time.Second, 42*time.Second),
	}
}

// terminatingPod is a StatefulSet's pod stuck terminating, with
// pod-level resources (and no status.qosClass), a localhost seccomp
// profile, an ephemeral container and volumes of many types.
func terminatingPod(now time.Time) *corev1.Pod {
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	pg := container("postgres", "postgres:16.4")
	pg.Ports = []corev1.ContainerPort{{ContainerPort: 5432, Protocol: corev1.ProtocolTCP}}
	pg.Env = []corev1.EnvVar{{Name: "PGDATA", Value: "/var/lib/postgresql/data/pgdata"}}
	pg.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/postgresql/data"}, {Name: "scratch", MountPath: "/tmp"}, apiAccessMount("kube-api-access-7qvzl")}
	pg.VolumeDevices = []corev1.VolumeDevice{{Name: "wal", DevicePath: "/dev/xvdb"}, {Name: "raw", DevicePath: "/dev/xvda"}}
	pg.SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptrTo("profiles/postgres.json")}}
	pg.LivenessProbe = &corev1.Probe{
		ProbeHandler:   corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Path: "/live", Port: intstr.FromInt32(8008), Scheme: corev1.URISchemeHTTPS}},
		TimeoutSeconds: 3, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 6, InitialDelaySeconds: 30,
	}

	exporter := container("exporter", "quay.io/prometheuscommunity/postgres-exporter:v0.15.0")
	exporter.Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9187, Protocol: corev1.ProtocolTCP}}
	exporter.VolumeMounts = []corev1.VolumeMount{apiAccessMount("kube-api-access-7qvzl")}

	perms := container("init-perms", "busybox:1.36")
	perms.Command = []string{"chown", "-R", "999:999", "/var/lib/postgresql/data"}
	perms.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/postgresql/data"}}

	debug := corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon(container("debugger-8k2xq", "busybox:1.36")),
		TargetContainerName:      "postgres",
	}
	debug.Stdin, debug.TTY = true, true

	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "db-0", GenerateName: "db-", Namespace: "data",
			UID: "8a2d4c6e-1f3b-4d5a-9c7e-2b4d6f8a0c13", ResourceVersion: "91822",
			CreationTimestamp:          ago(400 * 24 * time.Hour),
			DeletionTimestamp:          ptrTo(ago(6 * time.Minute)),
			DeletionGracePeriodSeconds: ptrTo[int64](30),
			Labels:                     map[string]string{"app": "db", "apps.kubernetes.io/pod-index": "0", "statefulset.kubernetes.io/pod-name": "db-0"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "1c3e5a7b-9d2f-4b6a-8e0c-3d5f7a9b1c24",
				Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true),
			}},
			Finalizers: []string{"example.com/backup"},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}},
				{Name: "wal", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "wal-db-0", ReadOnly: true}}},
				{Name: "raw", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
					ObjectMeta: metav1.ObjectMeta{
						Labels: map[string]string{"app": "db", "volume": "raw"},
						Annotations: map[string]string{
							"example.com/owner":  "dba",
							"example.com/policy": "retain: true\nsnapshot: daily",
						},
					},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:        corev1.VolumeResourceRequirements{Requests: resourceList("storage", "1Gi")},
						StorageClassName: ptrTo("fast"),
						VolumeMode:       ptrTo(corev1.PersistentVolumeBlock),
						DataSource:       &corev1.TypedLocalObjectReference{APIGroup: ptrTo("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "raw-snap"},
					},
				}}}},
				{Name: "scratch-claim", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: resourceList("storage", "1Gi")},
					},
				}}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "backup", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example.com", Path: "/exports/db", ReadOnly: true}}},
				{Name: "secrets-store", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
					Driver: "secrets-store.csi.k8s.io", ReadOnly: ptrTo(true),
					VolumeAttributes: map[string]string{
						"secretProviderClass": "db-secrets",
						"usePodIdentity":      "false",
						"objects":             strings.Repeat("array:- objectName: db-password objectType: secret ", 4),
					},
				}}},
				{Name: "tools", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example.com/db/tools:1.0", PullPolicy: corev1.PullIfNotPresent}}},
				{Name: "repo", VolumeSource: corev1.VolumeSource{GitRepo: &corev1.GitRepoVolumeSource{Repository: "https://example.com/db/config.git", Revision: "main"}}},
				{Name: "bundle", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "db-tls"}, Optional: ptrTo(true)}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "db-config"}}},
					{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptrTo("example.com:ca"), Path: "ca.pem"}},
				}}}},
				apiAccessVolume("kube-api-access-7qvzl"),
			},
			InitContainers:      []corev1.Container{perms},
			Containers:          []corev1.Container{pg, exporter},
			EphemeralContainers: []corev1.EphemeralContainer{debug},
			Resources: &corev1.ResourceRequirements{
				Requests: resourceList("cpu", "1", "memory", "2Gi"),
				Limits:   resourceList("cpu", "1", "memory", "2Gi"),
			},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptrTo[int64](30),
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "default",
			DeprecatedServiceAccount:      "default",
			NodeName:                      "cp-1",
			Hostname:                      "db-0",
			Subdomain:                     "db",
			SecurityContext: &corev1.PodSecurityContext{
				FSGroup:        ptrTo[int64](999),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptrTo("profiles/db.json")},
			},
			SchedulerName:     corev1.DefaultSchedulerName,
			PriorityClassName: "db-critical",
			Priority:          ptrTo[int32](1000000),
			RuntimeClassName:  ptrTo("gvisor"),
			NodeSelector:      map[string]string{"kubernetes.io/os": "linux", "disktype": "ssd"},
			Tolerations: append([]corev1.Toleration{
				{Operator: corev1.TolerationOpExists},
				{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: "dedicated", Operator: corev1.TolerationOpExists},
			}, defaultTolerations()...),
			SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptrTo("db-group")},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: podConditions(now, corev1.ConditionFalse),
			HostIP:     "172.18.0.2", HostIPs: []corev1.HostIP{{IP: "172.18.0.2"}},
			PodIP: "10.244.0.9", PodIPs: []corev1.PodIP{{IP: "10.244.0.9"}},
			StartTime: ptrTo(ago(400 * 24 * time.Hour)),
			InitContainerStatuses: []corev1.ContainerStatus{{
				Name: "init-perms", Ready: true,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					Reason: "Completed", StartedAt: ago(400*24*time.Hour - 5*time.Second), FinishedAt: ago(400*24*time.Hour - 6*time.Second),
				}},
				Image: "docker.io/library/busybox:1.36", ImageID: "docker.io/library/busybox@sha256:9ae97d36d26566ff84e8893c64a6dc4fe8ca6d1144bf5b87b2b85a32def253c7",
				ContainerID: "containerd://f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5",
			}},
			ContainerStatuses: []corev1.ContainerStatus{
				{
					Name: "exporter", RestartCount: 7,
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container"}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						ExitCode: 2, Reason: "Error", StartedAt: ago(9 * time.Minute), FinishedAt: ago(8*time.Minute + 58*time.Second),
					}},
					Image: "quay.io/prometheuscommunity/postgres-exporter:v0.15.0", ImageID: "quay.io/prometheuscommunity/postgres-exporter@sha256:0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e",
					ContainerID: "containerd://0718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6",
				},
				{
					Name: "postgres", Started: ptrTo(true),
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(400*24*time.Hour - 8*time.Second)}},
					Image: "docker.io/library/postgres:16.4", ImageID: "docker.io/library/postgres@sha256:1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f",
					ContainerID: "containerd://18293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f607",
				},
			},
			EphemeralContainerStatuses: []corev1.ContainerStatus{{
				Name:  "debugger-8k2xq",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: ago(20 * time.Minute), FinishedAt: ago(12 * time.Minute)}},
				Image: "docker.io/library/busybox:1.36", ImageID: "docker.io/library/busybox@sha256:9ae97d36d26566ff84e8893c64a6dc4fe8ca6d1144bf5b87b2b85a32def253c7",
				ContainerID: "containerd://293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718",
			}},
		},
	}
}

// terminatingEvents are a kubelet event and an events.k8s.io series.
func terminatingEvents(now time.Time, pod *corev1.Pod) []corev1.Event {
	failed := event(now, pod, "Pod", "", corev1.EventTypeWarning, "FailedKillPod", "", "error killing pod: failed to \"KillPodSandbox\"", 0, 0, 0)
	failed.FirstTimestamp, failed.LastTimestamp = metav1.Time{}, metav1.NewTime(now.Add(-30*time.Second))
	failed.EventTime = metav1.NewMicroTime(now.Add(-5 * time.Minute))
	failed.Series = &corev1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(now.Add(-30 * time.Second))}
	failed.ReportingController, failed.ReportingInstance, failed.Action = "kubelet", "cp-1", "KillPod"
	return []corev1.Event{
		failed,
		event(now, pod, "Pod", "spec.containers{postgres}", corev1.EventTypeNormal, "Killing", "kubelet",
			"Stopping container postgres", 1, 6*time.Minute+30*time.Second, 6*time.Minute+30*time.Second),
	}
}

// pendingPod is a pod no node fits: no node, IPs or volumes.
func pendingPod(now time.Time) *corev1.Pod {
	job := container("job", "registry.example.com/batch/job:1")
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "report-29d4k", Namespace: "default", UID: "2d4f6a8c-3e5b-4a7c-9d1f-4b6d8f0a2c35",
			CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Second)),
		},
		Spec: corev1.PodSpec{
			Containers:                   []corev1.Container{job},
			RestartPolicy:                corev1.RestartPolicyNever,
			DNSPolicy:                    corev1.DNSClusterFirst,
			SchedulerName:                corev1.DefaultSchedulerName,
			SecurityContext:              &corev1.PodSecurityContext{},
			AutomountServiceAccountToken: ptrTo(false),
			ReadinessGates:               []corev1.PodReadinessGate{{ConditionType: "example.com/load-balancer-ready"}, {ConditionType: corev1.PodScheduled}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "job", Operator: metav1.LabelSelectorOpIn, Values: []string{"report", "export"}}}},
			}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
				Message:            "0/2 nodes are available: 2 Insufficient cpu.",
				LastTransitionTime: metav1.NewTime(now.Add(-90 * time.Second)),
			}},
			NominatedNodeName: "worker-1",
			QOSClass:          corev1.PodQOSBestEffort,
		},
	}
}

// qosPods are pods without status.qosClass whose class kubectl computes.
func qosPods(now time.Time) []*corev1.Pod {
	pod := func(name string, init []corev1.ResourceRequirements, cs ...corev1.ResourceRequirements) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "qos", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		for i, r := range init {
			c := container("init"+string(rune('a'+i)), "busybox:1.36")
			c.Resources = r
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}
		for i, r := range cs {
			c := container("c"+string(rune('a'+i)), "busybox:1.36")
			c.Resources = r
			p.Spec.Containers = append(p.Spec.Containers, c)
		}
		p.Status.Phase = corev1.PodPending
		return p
	}
	both := func(l corev1.ResourceList) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: l, Limits: l}
	}
	podLevel := pod("qos-pod-level", nil, corev1.ResourceRequirements{})
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Requests: resourceList("cpu", "500m")}
	return []*corev1.Pod{
		pod("qos-guaranteed", []corev1.ResourceRequirements{both(resourceList("cpu", "1", "memory", "1Gi"))},
			both(resourceList("cpu", "500m", "memory", "512Mi")), both(resourceList("cpu", "250m", "memory", "1Gi", "ephemeral-storage", "1Gi"))),
		pod("qos-burstable", nil, both(resourceList("cpu", "500m")), both(resourceList("cpu", "500m", "memory", "512Mi"))),
		pod("qos-unequal", nil, corev1.ResourceRequirements{Requests: resourceList("cpu", "250m", "memory", "1Gi"), Limits: resourceList("cpu", "500m", "memory", "1Gi")}),
		pod("qos-zero", nil, corev1.ResourceRequirements{Requests: resourceList("cpu", "0", "memory", "0", "ephemeral-storage", "1Gi")}),
		podLevel,
	}
}

// fixtures:end

// shown is events as a describer is given them when events are shown:
// never nil (nil means not shown).
func shown(events []corev1.Event) []corev1.Event {
	if events == nil {
		return []corev1.Event{}
	}
	return events
}
