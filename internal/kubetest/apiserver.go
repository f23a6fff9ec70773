package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// apiServer is one kube-apiserver on loopback. Its port, certificates and
// credentials stay the same across restarts, so clients built once keep working.
type apiServer struct {
	bin   string
	dir   string // holds certs/, sa.key, tokens.csv, apiserver.log
	port  int
	token string
	args  []string // every flag but --secure-port
	proc  *process
}

// newAPIServer writes the credentials the apiserver needs into dir: a token file with
// one admin token (group system:masters) and an ECDSA service-account key pair.
func newAPIServer(bin, dir, etcdURL string, opts Options) (*apiServer, error) {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, fmt.Errorf("apiserver: token: %w", err)
	}
	a := &apiServer{bin: bin, dir: dir, token: hex.EncodeToString(tok)}
	tokens := filepath.Join(dir, "tokens.csv")
	line := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", a.token, adminUser, adminUser)
	if err := os.WriteFile(tokens, []byte(line), 0o600); err != nil {
		return nil, fmt.Errorf("apiserver: token file: %w", err)
	}
	saKey := filepath.Join(dir, "sa.key")
	if err := writeECKey(saKey); err != nil {
		return nil, fmt.Errorf("apiserver: service-account key: %w", err)
	}
	advertise, reconciler := "127.0.0.1", "none"
	if opts.AdvertiseAddress != "" {
		advertise, reconciler = opts.AdvertiseAddress, "lease"
	}
	a.args = []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		// The Endpoints of default/kubernetes may not hold a loopback address, so with
		// the loopback default nothing reconciles them (the Service itself exists).
		"--advertise-address=" + advertise,
		"--endpoint-reconciler-type=" + reconciler,
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--token-auth-file=" + tokens,
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + opts.ServiceClusterIPRange,
		"--authorization-mode=RBAC",
		// No kubelet and usually no serviceaccount controller: without this, Pods
		// could not be created until a "default" ServiceAccount exists.
		"--disable-admission-plugins=ServiceAccount",
		// Without it a graceful stop waits for open watches until the HTTP server's
		// shutdown timeout (60s); with it, watches are ended within this period.
		"--shutdown-watch-termination-grace-period=2s",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
	a.args = append(a.args, opts.APIServerFlags...)
	return a, nil
}

// adminUser is the user (and uid) of the token in the token file.
const adminUser = "kubetest-admin"

func writeECKey(path string) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// url is the apiserver's base URL.
func (a *apiServer) url() string { return fmt.Sprintf("https://127.0.0.1:%d", a.port) }

// caFile is the self-signed serving certificate (with its CA) the apiserver writes
// into --cert-dir on first start and reuses on restart.
func (a *apiServer) caFile() string { return filepath.Join(a.dir, "certs", "apiserver.crt") }

// start starts the apiserver and waits until /readyz passes. The first start picks a
// port (retrying when it was taken); later starts reuse it, retrying while the old
// socket is still being released.
func (a *apiServer) start(timeout time.Duration) error {
	first := a.port == 0
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if first {
			p, err := freePort()
			if err != nil {
				return err
			}
			a.port = p
		}
		args := append([]string{fmt.Sprintf("--secure-port=%d", a.port)}, a.args...)
		p, err := startProcess("kube-apiserver", filepath.Join(a.dir, "apiserver.log"), a.bin, args...)
		if err != nil {
			return err
		}
		a.proc = p
		hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			// Only for the probe: the serving cert does not exist before the first start.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		}}
		lastErr = waitReady(p, timeout, func(ctx context.Context) error {
			return a.checkReady(ctx, hc)
		})
		hc.CloseIdleConnections()
		if lastErr == nil {
			return nil
		}
		_ = p.kill()
		if !portInUse(p) {
			return lastErr
		}
		if !first {
			time.Sleep(time.Second)
		}
	}
	return lastErr
}

func (a *apiServer) checkReady(ctx context.Context, hc *http.Client) error {
	code, body, err := probe(ctx, hc, a.url()+"/readyz", a.token)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("/readyz: %d: %s", code, failedChecks(body))
	}
	return err
}

// probe GETs url (with a bearer token when given) and returns the status and up to
// 64 KiB of the body.
func probe(ctx context.Context, hc *http.Client, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), nil
}

// failedChecks keeps the "[-]" lines of a verbose health answer, or the whole
// (short) body when there are none.
func failedChecks(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "[-]") {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return strings.TrimSpace(lastLines(body, 3))
	}
	return strings.Join(out, "; ")
}
