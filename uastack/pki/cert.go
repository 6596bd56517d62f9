package pki

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// Defaults for new certificates.
const (
	DefaultKeyBits  = 2048
	DefaultValidity = 5 * 365 * 24 * time.Hour
)

// MaxChainCerts bounds the number of certificates accepted in one chain, so a peer
// cannot make us parse an unbounded list.
const MaxChainCerts = 16

// ThumbprintSize is the length of a certificate thumbprint (SHA-1) in bytes.
const ThumbprintSize = sha1.Size

// Thumbprint returns the SHA-1 digest of a DER certificate: the identifier OPC UA
// uses for certificates (ReceiverCertificateThumbprint, file names in stores).
func Thumbprint(der []byte) [ThumbprintSize]byte { return sha1.Sum(der) }

// ThumbprintHex returns the thumbprint as upper-case hex, the form shown to users.
func ThumbprintHex(der []byte) string {
	t := sha1.Sum(der)
	return strings.ToUpper(hex.EncodeToString(t[:]))
}

// LeafDER returns the first certificate of a chain sent as concatenated DER
// certificates (the way OPC UA sends SenderCertificate), without parsing it and
// without allocating. The result aliases b.
func LeafDER(b []byte) ([]byte, error) {
	n, err := derLength(b)
	if err != nil {
		return nil, err
	}
	return b[:n:n], nil
}

// SplitChain splits concatenated DER certificates into one slice per certificate,
// without parsing them. The slices alias b. At most MaxChainCerts are accepted.
func SplitChain(b []byte) ([][]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("pki: empty certificate chain: %w", ErrInvalid)
	}
	var out [][]byte
	for len(b) > 0 {
		if len(out) == MaxChainCerts {
			return nil, fmt.Errorf("pki: certificate chain longer than %d: %w", MaxChainCerts, ErrInvalid)
		}
		n, err := derLength(b)
		if err != nil {
			return nil, err
		}
		out = append(out, b[:n:n])
		b = b[n:]
	}
	return out, nil
}

// ParseChain parses concatenated DER certificates, leaf first.
func ParseChain(b []byte) ([]*x509.Certificate, error) {
	parts, err := SplitChain(b)
	if err != nil {
		return nil, err
	}
	certs := make([]*x509.Certificate, len(parts))
	for i, p := range parts {
		c, err := x509.ParseCertificate(p)
		if err != nil {
			return nil, fmt.Errorf("pki: certificate %d of chain: %w: %w", i, ErrInvalid, err)
		}
		certs[i] = c
	}
	return certs, nil
}

// derLength returns the total length (tag, length and content) of the DER SEQUENCE
// at the start of b, checked against len(b).
func derLength(b []byte) (int, error) {
	if len(b) < 2 {
		return 0, fmt.Errorf("pki: truncated certificate: %w", ErrInvalid)
	}
	if b[0] != 0x30 {
		return 0, fmt.Errorf("pki: certificate does not start with a DER SEQUENCE (0x%02x): %w", b[0], ErrInvalid)
	}
	hdr := 2
	length := int64(b[1])
	if length >= 0x80 {
		nb := int(length & 0x7f)
		if nb == 0 || nb > 4 {
			return 0, fmt.Errorf("pki: unsupported DER length form: %w", ErrInvalid)
		}
		if len(b) < 2+nb {
			return 0, fmt.Errorf("pki: truncated certificate: %w", ErrInvalid)
		}
		length = 0
		for _, c := range b[2 : 2+nb] {
			length = length<<8 | int64(c)
		}
		hdr += nb
	}
	total := int64(hdr) + length
	if total > int64(len(b)) {
		return 0, fmt.Errorf("pki: truncated certificate (%d of %d bytes): %w", len(b), total, ErrInvalid)
	}
	return int(total), nil
}

var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// ApplicationURI returns the first URI of the certificate's SubjectAltName, which
// OPC UA requires to be the application's ApplicationUri, or "" if there is none.
func ApplicationURI(c *x509.Certificate) string {
	if u := sanURIs(c); len(u) > 0 {
		return u[0]
	}
	return ""
}

// sanURIs returns the URIs of the SubjectAltName exactly as encoded: comparing
// url.URL.String() would compare Go's re-encoding of them instead.
func sanURIs(c *x509.Certificate) []string {
	var out []string
	for _, ext := range c.Extensions {
		if !ext.Id.Equal(oidSubjectAltName) {
			continue
		}
		var seq asn1.RawValue
		if rest, err := asn1.Unmarshal(ext.Value, &seq); err != nil || len(rest) != 0 || !seq.IsCompound {
			break
		}
		b := seq.Bytes
		for len(b) > 0 {
			var v asn1.RawValue
			var err error
			if b, err = asn1.Unmarshal(b, &v); err != nil {
				break
			}
			if v.Class == asn1.ClassContextSpecific && v.Tag == 6 {
				out = append(out, string(v.Bytes))
			}
		}
	}
	if out == nil {
		for _, u := range c.URIs {
			out = append(out, u.String())
		}
	}
	return out
}

// CertRequest describes a certificate to create with CreateCertificate.
type CertRequest struct {
	ApplicationURI string   // SubjectAltName URI; required unless IsCA
	CommonName     string   // subject CN; required
	Organization   string   // subject O
	Hosts          []string // SubjectAltName DNS names, or IP addresses when they parse as one

	NotBefore time.Time       // zero: one hour ago, to tolerate clock skew between peers
	Validity  time.Duration   // zero: DefaultValidity
	KeyBits   int             // zero: DefaultKeyBits
	Key       *rsa.PrivateKey // use this key instead of generating one
	IsCA      bool            // create a CA certificate (for tests and private PKIs)
}

var oidDomainComponent = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}

// CreateCertificate creates an RSA certificate signed with SHA-256. With a nil issuer
// it is self-signed, the usual OPC UA application instance certificate: key usage
// digitalSignature, nonRepudiation, keyEncipherment, dataEncipherment, keyCertSign;
// extended key usage serverAuth and clientAuth. It returns the DER encoding and the
// private key.
func CreateCertificate(req CertRequest, issuer *x509.Certificate, issuerKey *rsa.PrivateKey) (der []byte, key *rsa.PrivateKey, err error) {
	if req.CommonName == "" {
		return nil, nil, errors.New("pki: certificate request without common name")
	}
	if req.ApplicationURI == "" && !req.IsCA {
		return nil, nil, errors.New("pki: certificate request without application URI")
	}
	if (issuer == nil) != (issuerKey == nil) {
		return nil, nil, errors.New("pki: issuer certificate and issuer key must be given together")
	}
	key = req.Key
	if key == nil {
		bits := req.KeyBits
		if bits == 0 {
			bits = DefaultKeyBits
		}
		if key, err = rsa.GenerateKey(rand.Reader, bits); err != nil {
			return nil, nil, fmt.Errorf("pki: generate RSA key: %w", err)
		}
	}
	notBefore := req.NotBefore
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Hour)
	}
	validity := req.Validity
	if validity == 0 {
		validity = DefaultValidity
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("pki: serial number: %w", err)
	}
	pubDER := x509.MarshalPKCS1PublicKey(&key.PublicKey)
	ski := sha1.Sum(pubDER)

	subject := pkix.Name{CommonName: req.CommonName}
	if req.Organization != "" {
		subject.Organization = []string{req.Organization}
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject,
		NotBefore:             notBefore.UTC(),
		NotAfter:              notBefore.Add(validity).UTC(),
		SignatureAlgorithm:    x509.SHA256WithRSA,
		SubjectKeyId:          ski[:],
		BasicConstraintsValid: true,
	}
	for _, h := range req.Hosts {
		if h == "" {
			continue
		}
		if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			continue
		}
		tmpl.DNSNames = append(tmpl.DNSNames, h)
		if len(tmpl.DNSNames) == 1 {
			// Part 6 recommends DC=<host> in the subject of application certificates.
			tmpl.Subject.ExtraNames = append(tmpl.Subject.ExtraNames,
				pkix.AttributeTypeAndValue{Type: oidDomainComponent, Value: h})
		}
	}
	if req.IsCA {
		tmpl.IsCA = true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageContentCommitment |
			x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	if req.ApplicationURI != "" {
		// The URI goes in verbatim through ExtraExtensions: url.URL would re-encode it.
		san, err := marshalSAN(req.ApplicationURI, tmpl.DNSNames, tmpl.IPAddresses)
		if err != nil {
			return nil, nil, err
		}
		tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{Id: oidSubjectAltName, Value: san})
		tmpl.DNSNames, tmpl.IPAddresses = nil, nil
	}
	parent, signer := tmpl, key
	if issuer != nil {
		parent, signer = issuer, issuerKey
	} else {
		if !req.IsCA {
			tmpl.KeyUsage |= x509.KeyUsageCertSign // Part 6: self-signed certificates sign themselves
		}
		tmpl.AuthorityKeyId = tmpl.SubjectKeyId
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: create certificate: %w", err)
	}
	return der, key, nil
}

// marshalSAN encodes a SubjectAltName with one URI, DNS names and IP addresses.
func marshalSAN(uri string, dns []string, ips []net.IP) ([]byte, error) {
	var names []asn1.RawValue
	names = append(names, asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 6, Bytes: []byte(uri)})
	for _, d := range dns {
		names = append(names, asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 2, Bytes: []byte(d)})
	}
	for _, ip := range ips {
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		names = append(names, asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 7, Bytes: ip})
	}
	b, err := asn1.Marshal(names)
	if err != nil {
		return nil, fmt.Errorf("pki: encode subjectAltName: %w", err)
	}
	return b, nil
}
