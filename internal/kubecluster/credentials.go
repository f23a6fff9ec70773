package kubecluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/csv"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
)

// Files under Dir.
const (
	tokensFile          = "tokens.csv"
	saKeyFile           = "sa.key"
	caFile              = "ca.crt"
	certDir             = "certs"
	servingCertFile     = "certs/apiserver.crt" // serving certificate, then its CA
	servingKeyFile      = "certs/apiserver.key"
	kubeconfigFile      = "kubeconfig"
	kcmKubeconfigFile   = "controller-manager.kubeconfig"
	schedKubeconfigFile = "scheduler.kubeconfig"
)

// adminUser is the user (and uid) of the token in the token file; its group is
// system:masters.
const adminUser = "kubecluster-admin"

// credentials are what a client needs: the admin token and the CA of the
// apiserver's serving certificate (PEM).
type credentials struct {
	token string
	ca    []byte
}

// writeCredentials writes a new admin token (tokens.csv), a service-account key
// (sa.key), and a serving certificate for the apiserver with its CA (certs/,
// ca.crt), replacing any from an earlier run.
func writeCredentials(c *config) (*credentials, error) {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	cr := &credentials{token: hex.EncodeToString(tok)}
	line := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", cr.token, adminUser, adminUser)
	if err := os.WriteFile(filepath.Join(c.Dir, tokensFile), []byte(line), 0o600); err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	if err := writeECKey(filepath.Join(c.Dir, saKeyFile)); err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	host, ips, dns := servingNames(c.Options)
	// The function kube-apiserver itself uses for --cert-dir, with more names: it
	// would name only one of 127.0.0.1 and the bind address.
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, ips, dns)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	if cr.ca, err = caOf(certPEM); err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(c.Dir, certDir), 0o700); err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
		perm os.FileMode
	}{
		{servingCertFile, certPEM, 0o644},
		{servingKeyFile, keyPEM, 0o600},
		{caFile, cr.ca, 0o644},
	} {
		if err := os.WriteFile(filepath.Join(c.Dir, f.name), f.data, f.perm); err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
	}
	return cr, nil
}

// readCredentials reads back what writeCredentials wrote.
func readCredentials(dir string) (*credentials, error) {
	f, err := os.Open(filepath.Join(dir, tokensFile))
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	rec, err := csv.NewReader(f).Read()
	if err != nil || len(rec) < 3 || rec[0] == "" {
		return nil, fmt.Errorf("token file %s: no token line (%v)", f.Name(), err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, caFile))
	if err != nil {
		return nil, fmt.Errorf("ca: %w", err)
	}
	return &credentials{token: rec[0], ca: ca}, nil
}

// servingNames returns the names the serving certificate is for: the advertise
// address (kube-apiserver's "public address") as its host; loopback, the bind
// address, ServerURL's host and the first Service IP(s) as further IPs; localhost,
// the kubernetes.default names and a DNS host of ServerURL as DNS names. The
// result is deterministic and has no duplicates.
func servingNames(o Options) (host string, ips []net.IP, dns []string) {
	host = "127.0.0.1"
	if o.AdvertiseAddress != "" {
		host = o.AdvertiseAddress
	}
	var addrs []netip.Addr
	add := func(s string) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			if s != "" && !slices.Contains(dns, s) {
				dns = append(dns, s)
			}
			return
		}
		a = a.Unmap()
		if a.IsUnspecified() || a.String() == host || slices.Contains(addrs, a) {
			return
		}
		addrs = append(addrs, a)
	}
	add("127.0.0.1")
	add("::1")
	add(o.BindAddress)
	if u, err := url.Parse(o.ServerURL); err == nil {
		add(u.Hostname())
	}
	svc, _ := firstServiceIPs(o.ServiceClusterIPRange)
	for _, a := range svc {
		add(a.String())
	}
	for _, n := range []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"} {
		add(n)
	}
	dns = slices.DeleteFunc(dns, func(n string) bool { return n == host })
	for _, a := range addrs {
		ips = append(ips, net.IP(a.AsSlice()))
	}
	return host, ips, dns
}

// caOf returns the CA certificates (PEM) of a PEM bundle.
func caOf(bundle []byte) ([]byte, error) {
	var out []byte
	for rest := bundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		if c.IsCA {
			out = append(out, pem.EncodeToMemory(b)...)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no CA certificate in the bundle")
	}
	return out, nil
}

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

// writeKubeconfig writes a kubeconfig for the admin user that verifies server
// against ca.
func writeKubeconfig(path, server string, cr *credentials) error {
	const name = "kubecluster"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cr.ca}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: cr.token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return nil
}
