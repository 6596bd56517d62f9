package api

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/uagate/gateway/uastack/pki"
)

// Certificates of a certificate store (pki.Store): the application's own,
// the trusted peers and CAs, and the peers refused so far; trusting a
// refused one moves it to trusted/, and a trusted one can be removed. The
// store is the endpoint's (?endpoint=) or the gateway's default.

// Certificate describes one certificate file of a store.
type Certificate struct {
	Thumbprint     string    `json:"thumbprint" doc:"SHA-1 of the DER, upper-case hex"`
	Folder         string    `json:"folder" doc:"own, trusted, issuers or rejected"`
	File           string    `json:"file" doc:"file name in the folder"`
	Subject        string    `json:"subject"`
	Issuer         string    `json:"issuer"`
	ApplicationURI string    `json:"applicationUri,omitempty"`
	DNSNames       []string  `json:"dnsNames,omitempty"`
	IPAddresses    []string  `json:"ipAddresses,omitempty"`
	NotBefore      time.Time `json:"notBefore"`
	NotAfter       time.Time `json:"notAfter"`
	IsCA           bool      `json:"isCA,omitempty"`
	SelfSigned     bool      `json:"selfSigned,omitempty"`
	// DER is the certificate, base64.
	DER []byte `json:"der"`
}

// Certificates are a store's folders.
type Certificates struct {
	Own      []Certificate `json:"own"`
	Trusted  []Certificate `json:"trusted"`
	Issuers  []Certificate `json:"issuers"`
	Rejected []Certificate `json:"rejected"`
}

var folders = map[string]pki.Folder{
	"own": pki.FolderOwn, "trusted": pki.FolderTrusted, "issuers": pki.FolderIssuers, "rejected": pki.FolderRejected,
}

var pEndpointStore = param{"endpoint", "the endpoint whose certificate store to use; default the gateway's", "string"}

func (s *Server) store(r *http.Request) (*pki.Store, error) {
	ep := r.URL.Query().Get("endpoint")
	st, err := s.b.Store(ep)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fieldProblemf(ErrNotFound, "endpoint", "endpoint %q has no certificate store", ep)
	}
	return st, nil
}

func certificateOf(folder string, f pki.CertFile) Certificate {
	c := f.Cert
	out := Certificate{Thumbprint: f.Thumbprint, Folder: folder, File: filepath.Base(f.Path),
		Subject: c.Subject.String(), Issuer: c.Issuer.String(), ApplicationURI: pki.ApplicationURI(c),
		DNSNames: c.DNSNames, NotBefore: c.NotBefore.UTC(), NotAfter: c.NotAfter.UTC(), IsCA: c.IsCA,
		SelfSigned: c.CheckSignatureFrom(c) == nil, DER: c.Raw}
	for _, ip := range c.IPAddresses {
		out.IPAddresses = append(out.IPAddresses, ip.String())
	}
	return out
}

func listFolder(st *pki.Store, name string) ([]Certificate, error) {
	files, err := st.List(folders[name])
	if err != nil {
		return nil, err
	}
	out := make([]Certificate, 0, len(files))
	for _, f := range files {
		out = append(out, certificateOf(name, f))
	}
	return out, nil
}

func (s *Server) getCertificates(w http.ResponseWriter, r *http.Request) error {
	st, err := s.store(r)
	if err != nil {
		return err
	}
	var out Certificates
	for name, dst := range map[string]*[]Certificate{"own": &out.Own, "trusted": &out.Trusted, "issuers": &out.Issuers, "rejected": &out.Rejected} {
		if *dst, err = listFolder(st, name); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) getCertificateFolder(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("folder")
	if _, ok := folders[name]; !ok {
		return fieldProblemf(ErrNotFound, "folder", "no certificate folder %q (own, trusted, issuers, rejected)", name)
	}
	st, err := s.store(r)
	if err != nil {
		return err
	}
	list, err := listFolder(st, name)
	if err != nil {
		return err
	}
	p, err := paginate(r, list, func(c *Certificate) string { return c.Thumbprint + "/" + c.File })
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

func checkThumbprint(tp string) error {
	if len(tp) != 40 || strings.Trim(strings.ToUpper(tp), "0123456789ABCDEF") != "" {
		return fieldProblemf(ErrInvalid, "thumbprint", "thumbprint %q: want 40 hex digits (SHA-1)", tp)
	}
	return nil
}

func storeError(folder, tp string, err error) error {
	if errors.Is(err, pki.ErrNotFound) {
		return fieldProblemf(ErrNotFound, "thumbprint", "no certificate %s in %s", strings.ToUpper(tp), folder)
	}
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("certificate store: %w", err)
	}
	return err
}

func (s *Server) trustRejected(w http.ResponseWriter, r *http.Request) error {
	tp := r.PathValue("thumbprint")
	if err := checkThumbprint(tp); err != nil {
		return err
	}
	st, err := s.store(r)
	if err != nil {
		return err
	}
	p, err := st.TrustRejected(tp)
	if err != nil {
		return storeError("rejected", tp, err)
	}
	s.log.Info("api: certificate trusted", "thumbprint", strings.ToUpper(tp), "file", p)
	// Sessions waiting to retry (slowly, after a refused certificate) try
	// again now rather than at their next scheduled attempt.
	if rb, ok := s.b.(Retrier); ok {
		rb.RetryNow()
	}
	c, err := readCertificate("trusted", p)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, c)
}

func readCertificate(folder, p string) (Certificate, error) {
	der, err := os.ReadFile(p)
	if err != nil {
		return Certificate{}, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return Certificate{}, err
	}
	return certificateOf(folder, pki.CertFile{Path: p, Thumbprint: pki.ThumbprintHex(c.Raw), Cert: c}), nil
}

func (s *Server) removeTrusted(w http.ResponseWriter, r *http.Request) error {
	tp := r.PathValue("thumbprint")
	if err := checkThumbprint(tp); err != nil {
		return err
	}
	st, err := s.store(r)
	if err != nil {
		return err
	}
	if err := st.Remove(pki.FolderTrusted, tp); err != nil {
		return storeError("trusted", tp, err)
	}
	s.log.Info("api: trusted certificate removed", "thumbprint", strings.ToUpper(tp))
	w.WriteHeader(http.StatusNoContent)
	return nil
}
