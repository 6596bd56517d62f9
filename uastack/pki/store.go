package pki

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Folder names a sub-directory of a Store that holds certificates.
type Folder string

// The certificate folders of a Store, relative to its root.
const (
	FolderOwn      Folder = "own/certs"
	FolderTrusted  Folder = "trusted/certs"
	FolderIssuers  Folder = "issuers/certs"
	FolderRejected Folder = "rejected/certs"
)

// Other sub-directories of a Store.
const (
	dirOwnPrivate = "own/private"
	dirTrustedCRL = "trusted/crl"
	dirIssuerCRL  = "issuers/crl"
)

// maxFileSize bounds the size of a certificate, key or CRL file we read.
const maxFileSize = 4 << 20

// Options configure a Store. The zero value is usable.
type Options struct {
	// AutoAccept trusts unknown peer certificates: they are copied to trusted/certs
	// and a warning is logged. For development only.
	AutoAccept bool
	// RequireCRL refuses a CA-issued certificate when no CRL of its issuer is found
	// (ErrRevocationUnknown). Off by default: a missing CRL is logged at debug level.
	RequireCRL bool

	// For the certificate LoadOrCreateOwn creates.
	ApplicationName string        // subject CN; default "gateway"
	Organization    string        // subject O; default "uagate"
	KeyBits         int           // default DefaultKeyBits (2048)
	Validity        time.Duration // default DefaultValidity (5 years)

	// MaxRejected bounds the files kept in rejected/certs; the oldest are removed
	// beyond it. Default 256.
	MaxRejected int

	Logger *slog.Logger     // default slog.Default()
	Now    func() time.Time // default time.Now; set by tests
}

func (o *Options) ensureDefaults() {
	if o.ApplicationName == "" {
		o.ApplicationName = "gateway"
	}
	if o.Organization == "" {
		o.Organization = "uagate"
	}
	if o.KeyBits == 0 {
		o.KeyBits = DefaultKeyBits
	}
	if o.Validity == 0 {
		o.Validity = DefaultValidity
	}
	if o.MaxRejected <= 0 {
		o.MaxRejected = 256
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Store is a directory certificate store. See the package documentation for the
// layout. It is safe for concurrent use.
type Store struct {
	dir  string
	opts Options
	log  *slog.Logger

	mu sync.Mutex // serialises writes to the directories

	cache       trustCache   // parsed trust lists (cache.go)
	folderLoads atomic.Int64 // folders (re)parsed into cache, for tests
	rejectSaves atomic.Int64 // files written to rejected/certs, for tests
}

// Open opens the store rooted at dir, creating the directories that are missing.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("pki: empty store directory")
	}
	opts.ensureDefaults()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("pki: store directory %q: %w", dir, err)
	}
	s := &Store{dir: abs, opts: opts, log: opts.Logger.With("store", abs)}
	for _, d := range []string{string(FolderOwn), string(FolderTrusted), string(FolderIssuers),
		string(FolderRejected), dirTrustedCRL, dirIssuerCRL} {
		if err := os.MkdirAll(s.path(d), 0o755); err != nil {
			return nil, fmt.Errorf("pki: %w", err)
		}
	}
	if err := os.MkdirAll(s.path(dirOwnPrivate), 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	// MkdirAll leaves an existing directory's mode alone; the key directory must not be
	// readable by others even if someone created it by hand.
	if err := os.Chmod(s.path(dirOwnPrivate), 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return s, nil
}

// Dir returns the absolute root directory of the store.
func (s *Store) Dir() string { return s.dir }

// Path returns the absolute path of a folder of the store.
func (s *Store) Path(f Folder) string { return s.path(string(f)) }

func (s *Store) path(rel string) string { return filepath.Join(s.dir, filepath.FromSlash(rel)) }

// LoadOrCreateOwn returns the application instance certificate for appURI with its
// private key. It uses a certificate from own/certs whose SubjectAltName URI is
// appURI, that is valid now, and whose key (own/private/<same name>.pem) matches;
// the one valid longest wins. When there is none it creates a self-signed one for
// appURI and hosts (DNS names or IP addresses; default: this host's name and
// localhost) and saves it. A certificate that does not list all hosts is still used,
// with a warning: replacing it would make every peer distrust us.
func (s *Store) LoadOrCreateOwn(appURI string, hosts []string) (cert *x509.Certificate, der []byte, key *rsa.PrivateKey, err error) {
	if appURI == "" {
		return nil, nil, nil, errors.New("pki: empty application URI")
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	cert, key, stale := s.findOwn(appURI)
	if cert != nil {
		if missing := missingHosts(cert, hosts); len(missing) > 0 {
			s.log.Warn("pki: own certificate does not list all hosts; peers checking the hostname may refuse it",
				"thumbprint", ThumbprintHex(cert.Raw), "missing", missing)
		}
		return cert, cert.Raw, key, nil
	}
	if stale > 0 {
		s.log.Warn("pki: no usable own certificate (expired, other application URI or no matching key); creating a new one",
			"applicationUri", appURI, "ignored", stale)
	}
	if len(hosts) == 0 {
		hosts = defaultHosts()
	}
	der, key, err = CreateCertificate(CertRequest{
		ApplicationURI: appURI,
		CommonName:     s.opts.ApplicationName,
		Organization:   s.opts.Organization,
		Hosts:          hosts,
		NotBefore:      s.opts.Now().Add(-time.Hour),
		Validity:       s.opts.Validity,
		KeyBits:        s.opts.KeyBits,
	}, nil, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pki: parse created certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pki: encode private key: %w", err)
	}
	base := fileBase(cert)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	// The key first: a certificate without its key would be skipped, a key without
	// its certificate is harmless.
	if err := writeFileAtomic(filepath.Join(s.path(dirOwnPrivate), base+".pem"), keyPEM, 0o600); err != nil {
		return nil, nil, nil, err
	}
	if err := writeFileAtomic(filepath.Join(s.Path(FolderOwn), base+".der"), der, 0o644); err != nil {
		return nil, nil, nil, err
	}
	s.log.Info("pki: created application instance certificate",
		"applicationUri", appURI, "thumbprint", ThumbprintHex(der), "hosts", hosts, "notAfter", cert.NotAfter)
	return cert, der, key, nil
}

// findOwn picks the best own certificate for appURI; stale counts the ones skipped.
func (s *Store) findOwn(appURI string) (best *x509.Certificate, bestKey *rsa.PrivateKey, stale int) {
	entries, err := os.ReadDir(s.Path(FolderOwn))
	if err != nil {
		return nil, nil, 0
	}
	now := s.opts.Now()
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		name := e.Name()
		ext := strings.ToLower(filepath.Ext(name))
		if ext != ".der" && ext != ".crt" && ext != ".cer" && ext != ".pem" {
			continue
		}
		certs, err := readCerts(filepath.Join(s.Path(FolderOwn), name))
		if err != nil || len(certs) == 0 {
			s.log.Warn("pki: unreadable own certificate", "file", name, "err", err)
			stale++
			continue
		}
		c := certs[0]
		if !hasURI(c, appURI) || now.Before(c.NotBefore) || now.After(c.NotAfter) {
			stale++
			continue
		}
		key, err := readKey(filepath.Join(s.path(dirOwnPrivate), strings.TrimSuffix(name, filepath.Ext(name))+".pem"))
		if err != nil {
			s.log.Warn("pki: own certificate without usable private key", "file", name, "err", err)
			stale++
			continue
		}
		pub, ok := c.PublicKey.(*rsa.PublicKey)
		if !ok || !pub.Equal(&key.PublicKey) {
			s.log.Warn("pki: own certificate and private key do not match", "file", name)
			stale++
			continue
		}
		if best == nil || c.NotAfter.After(best.NotAfter) {
			best, bestKey = c, key
		}
	}
	return best, bestKey, stale
}

func hasURI(c *x509.Certificate, uri string) bool {
	for _, u := range sanURIs(c) {
		if u == uri {
			return true
		}
	}
	return false
}

func missingHosts(c *x509.Certificate, hosts []string) []string {
	var missing []string
	for _, h := range hosts {
		if h != "" && c.VerifyHostname(strings.Trim(h, "[]")) != nil {
			missing = append(missing, h)
		}
	}
	return missing
}

func defaultHosts() []string {
	hosts := []string{}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		hosts = append(hosts, h)
	}
	return append(hosts, "localhost")
}

// CertFile is a certificate in a folder of the store.
type CertFile struct {
	Path       string
	Thumbprint string // upper-case hex
	Cert       *x509.Certificate
}

// List returns the certificates in a folder, sorted by file name. Files that do not
// parse are skipped with a warning.
func (s *Store) List(f Folder) ([]CertFile, error) {
	dir := s.Path(f)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	var out []CertFile
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		certs, err := readCerts(p)
		if err != nil {
			s.log.Warn("pki: skipping unreadable certificate file", "file", p, "err", err)
			continue
		}
		for _, c := range certs {
			out = append(out, CertFile{Path: p, Thumbprint: ThumbprintHex(c.Raw), Cert: c})
		}
	}
	return out, nil
}

// Trust writes a DER certificate to trusted/certs and returns the file's path.
func (s *Store) Trust(der []byte) (string, error) {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return "", fmt.Errorf("pki: %w: %w", ErrInvalid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := filepath.Join(s.Path(FolderTrusted), fileBase(c)+".der")
	if err := writeFileAtomic(p, c.Raw, 0o644); err != nil {
		return "", err
	}
	return p, nil
}

// TrustRejected moves the certificate with the given thumbprint (hex, any case) from
// rejected/certs to trusted/certs and returns its new path. This is what
// `gateway pki trust <thumbprint>` does.
func (s *Store) TrustRejected(thumbprint string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, c, err := s.find(FolderRejected, thumbprint)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(s.Path(FolderTrusted), fileBase(c)+".der")
	if err := writeFileAtomic(dst, c.Raw, 0o644); err != nil {
		return "", err
	}
	if err := os.Remove(src); err != nil {
		return "", fmt.Errorf("pki: %w", err)
	}
	return dst, nil
}

// Remove deletes the certificate with the given thumbprint from a folder.
func (s *Store) Remove(f Folder, thumbprint string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, _, err := s.find(f, thumbprint)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

func (s *Store) find(f Folder, thumbprint string) (string, *x509.Certificate, error) {
	want := strings.ToUpper(strings.TrimSpace(thumbprint))
	dir := s.Path(f)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", nil, fmt.Errorf("pki: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		certs, err := readCerts(p)
		if err != nil || len(certs) != 1 {
			continue
		}
		if ThumbprintHex(certs[0].Raw) == want {
			return p, certs[0], nil
		}
	}
	return "", nil, fmt.Errorf("pki: %s in %s: %w", thumbprint, dir, ErrNotFound)
}

// reject saves der to rejected/certs and trims the folder to MaxRejected files. A
// certificate already there is not written again: a peer that retries every second
// must not cost a write, an fsync and a directory scan each time. saved reports
// whether the file was written now.
func (s *Store) reject(c *x509.Certificate) (p string, saved bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := s.Path(FolderRejected)
	p = filepath.Join(dir, fileBase(c)+".der")
	if sameFileContent(p, c.Raw) {
		return p, false, nil
	}
	if err := writeFileAtomic(p, c.Raw, 0o644); err != nil {
		return "", false, err
	}
	s.rejectSaves.Add(1)
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) <= s.opts.MaxRejected {
		return p, true, nil
	}
	type aged struct {
		name string
		mod  time.Time
	}
	files := make([]aged, 0, len(entries))
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			files = append(files, aged{e.Name(), info.ModTime()})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod.Before(files[j].mod) })
	for i := 0; i < len(files)-s.opts.MaxRejected; i++ {
		if fp := filepath.Join(dir, files[i].name); fp != p {
			_ = os.Remove(fp)
		}
	}
	return p, true, nil
}

// sameFileContent reports whether the regular file p holds exactly want.
func sameFileContent(p string, want []byte) bool {
	info, err := os.Stat(p)
	if err != nil || !info.Mode().IsRegular() || info.Size() != int64(len(want)) {
		return false
	}
	b, err := readFileLimited(p)
	return err == nil && bytes.Equal(b, want)
}

// fileBase is the file name, without extension, used for a certificate:
// "<subject CN> [<thumbprint>]", the convention of the other OPC UA stacks.
func fileBase(c *x509.Certificate) string {
	return sanitizeName(c.Subject.CommonName) + " [" + ThumbprintHex(c.Raw) + "]"
}

// sanitizeName keeps a common name safe as part of a file name on any OS.
func sanitizeName(cn string) string {
	var b strings.Builder
	for _, r := range cn {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9',
			r == ' ', r == '-', r == '_', r == '.', r == '@', r == '(', r == ')':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 64 {
			break
		}
	}
	name := strings.Trim(b.String(), " .")
	if name == "" {
		name = "unknown"
	}
	return name
}

// readCerts reads one file of certificates: DER (one or concatenated) or PEM.
func readCerts(p string) ([]*x509.Certificate, error) {
	b, err := readFileLimited(p)
	if err != nil {
		return nil, err
	}
	if bytes.Contains(b, []byte("-----BEGIN")) {
		var certs []*x509.Certificate
		for {
			var blk *pem.Block
			blk, b = pem.Decode(b)
			if blk == nil {
				break
			}
			if blk.Type != "CERTIFICATE" {
				continue
			}
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, err
			}
			certs = append(certs, c)
		}
		if len(certs) == 0 {
			return nil, errors.New("no CERTIFICATE block")
		}
		return certs, nil
	}
	return ParseChain(b)
}

// readCRLs reads one file of CRLs: DER or PEM ("X509 CRL").
func readCRLs(p string) ([]*x509.RevocationList, error) {
	b, err := readFileLimited(p)
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(b, []byte("-----BEGIN")) {
		crl, err := x509.ParseRevocationList(b)
		if err != nil {
			return nil, err
		}
		return []*x509.RevocationList{crl}, nil
	}
	var out []*x509.RevocationList
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "X509 CRL" {
			continue
		}
		crl, err := x509.ParseRevocationList(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, crl)
	}
	return out, nil
}

// readKey reads an RSA private key in PEM (PKCS#8 or PKCS#1).
func readKey(p string) (*rsa.PrivateKey, error) {
	b, err := readFileLimited(p)
	if err != nil {
		return nil, err
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no private key block")
		}
		switch blk.Type {
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
			if err != nil {
				return nil, err
			}
			rk, ok := k.(*rsa.PrivateKey)
			if !ok {
				return nil, fmt.Errorf("private key is %T, not RSA", k)
			}
			return rk, nil
		case "RSA PRIVATE KEY":
			return x509.ParsePKCS1PrivateKey(blk.Bytes)
		}
	}
}

func readFileLimited(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	if info.Size() > maxFileSize {
		return nil, fmt.Errorf("%s: %d bytes, larger than %d", p, info.Size(), maxFileSize)
	}
	b := make([]byte, info.Size())
	if _, err := f.ReadAt(b, 0); err != nil && info.Size() > 0 {
		return nil, err
	}
	return b, nil
}

// writeFileAtomic writes through a temporary file and a rename, so a reader never
// sees half a certificate or key.
func writeFileAtomic(p string, data []byte, perm fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	ok = true
	return nil
}
