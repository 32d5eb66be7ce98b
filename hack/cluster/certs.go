package main

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/redislock/redislock/internal/pki"
)

// certValidity is long enough for any test run; a new cluster gets new certs.
const certValidity = 7 * 24 * time.Hour

// issue is pki.Issue, valid from an hour ago for certValidity.
func issue(tmpl *x509.Certificate, ca *pki.KeyPair) (*pki.KeyPair, error) {
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(certValidity)
	return pki.Issue(tmpl, ca)
}

// writePair writes k as name.crt and name.key in the PKI directory.
func writePair(k *pki.KeyPair, d dirs, name string) error {
	if err := os.WriteFile(d.pki(name+".crt"), k.CertPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(d.pki(name+".key"), k.KeyPEM, 0o600)
}

// client is who a kubeconfig authenticates as.
type client struct{ file, cn, org string }

// clients are the kubeconfigs the components use inside the namespace; the
// admin's is written twice, for inside and for the host.
var clients = []client{
	{"admin", "redislock-cluster-admin", "system:masters"},
	{"controller-manager", "system:kube-controller-manager", ""},
	{"scheduler", "system:kube-scheduler", ""},
	{"kubelet", "system:node:" + nodeName, "system:nodes"},
	{"kube-proxy", "system:kube-proxy", ""},
}

// writePKI writes the CA, the API server's serving and kubelet-client
// certificates, the service-account signing key and one kubeconfig per
// client below d; the host's admin kubeconfig reaches hostAPI.
func writePKI(d dirs, hostAPI string) error {
	if err := os.MkdirAll(d.pki(""), 0o700); err != nil {
		return err
	}
	ca, err := issue(&x509.Certificate{
		Subject: pkix.Name{CommonName: "redislock-cluster-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil)
	if err != nil {
		return err
	}
	serving, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(nodeIP), net.ParseIP(apiServiceIP)},
	}, ca)
	if err != nil {
		return err
	}
	sa, err := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "service-accounts"}}, nil)
	if err != nil {
		return err
	}
	for name, k := range map[string]*pki.KeyPair{"ca": ca, "apiserver": serving, "sa": sa} {
		if err := writePair(k, d, name); err != nil {
			return err
		}
	}
	kubeletClient, err := clientCert(ca, client{cn: "kube-apiserver-kubelet-client", org: "system:masters"})
	if err != nil {
		return err
	}
	if err := writePair(kubeletClient, d, "apiserver-kubelet-client"); err != nil {
		return err
	}
	for _, c := range clients {
		k, err := clientCert(ca, c)
		if err != nil {
			return err
		}
		if err := writeKubeconfig(d.pki(c.file+".kubeconfig"), fmt.Sprintf("https://127.0.0.1:%d", apiPort), ca, k); err != nil {
			return err
		}
		if c.file == "admin" {
			if err := writeKubeconfig(d.path("kubeconfig"), "https://"+hostAPI, ca, k); err != nil {
				return err
			}
		}
	}
	return nil
}

func clientCert(ca *pki.KeyPair, c client) (*pki.KeyPair, error) {
	subject := pkix.Name{CommonName: c.cn}
	if c.org != "" {
		subject.Organization = []string{c.org}
	}
	return issue(&x509.Certificate{
		Subject: subject, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
}

func writeKubeconfig(path, server string, ca, k *pki.KeyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["redislock"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca.CertPEM}
	cfg.AuthInfos["redislock"] = &clientcmdapi.AuthInfo{ClientCertificateData: k.CertPEM, ClientKeyData: k.KeyPEM}
	cfg.Contexts["redislock"] = &clientcmdapi.Context{Cluster: "redislock", AuthInfo: "redislock"}
	cfg.CurrentContext = "redislock"
	return clientcmd.WriteToFile(*cfg, path)
}
