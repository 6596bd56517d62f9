package client

import (
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"

	"github.com/uagate/gateway/uastack/pki"
	"github.com/uagate/gateway/uastack/ua"
)

// Identity is the user a session is activated for: Anonymous, UserName or X509.
// Its String and LogValue never show a secret.
type Identity interface {
	// TokenType is the kind of user identity token the identity needs.
	TokenType() ua.UserTokenType
	String() string
	validate() error
	// poolKey names the user without a secret (PoolKey.Identity);
	// secretHash digests the secret, to tell two configurations apart.
	poolKey() string
	secretHash() [sha256.Size]byte
}

// Anonymous returns the anonymous identity.
func Anonymous() Identity { return anonymousIdentity{} }

// UserName returns a user name and password identity. The password is copied.
func UserName(user, password string) Identity {
	return &userNameIdentity{user: user, password: []byte(password)}
}

// X509 returns an X.509 user identity: a certificate (DER, leaf first) and its
// private key, which signs the server's certificate and nonce to prove possession.
func X509(certificate []byte, key *rsa.PrivateKey) Identity {
	return &x509Identity{cert: certificate, key: key}
}

type anonymousIdentity struct{}

func (anonymousIdentity) TokenType() ua.UserTokenType { return ua.UserTokenTypeAnonymous }
func (anonymousIdentity) String() string              { return "anonymous" }
func (anonymousIdentity) validate() error             { return nil }
func (anonymousIdentity) poolKey() string             { return "anonymous" }
func (anonymousIdentity) secretHash() [sha256.Size]byte {
	return [sha256.Size]byte{}
}

type userNameIdentity struct {
	user     string
	password []byte
}

func (u *userNameIdentity) TokenType() ua.UserTokenType { return ua.UserTokenTypeUserName }
func (u *userNameIdentity) String() string              { return fmt.Sprintf("user %q", u.user) }

// LogValue keeps the password out of structured logs.
func (u *userNameIdentity) LogValue() slog.Value { return slog.StringValue(u.String()) }

func (u *userNameIdentity) poolKey() string { return "user:" + u.user }
func (u *userNameIdentity) secretHash() [sha256.Size]byte {
	return sha256.Sum256(u.password)
}

func (u *userNameIdentity) validate() error {
	if u.user == "" {
		return errors.New("empty user name")
	}
	return nil
}

type x509Identity struct {
	cert []byte
	key  *rsa.PrivateKey
}

func (x *x509Identity) TokenType() ua.UserTokenType { return ua.UserTokenTypeCertificate }

func (x *x509Identity) String() string {
	if leaf, err := pki.LeafDER(x.cert); err == nil {
		if c, err := x509.ParseCertificate(leaf); err == nil {
			return fmt.Sprintf("X.509 user %q [%s]", c.Subject.CommonName, pki.ThumbprintHex(leaf))
		}
	}
	return "X.509 user"
}

func (x *x509Identity) poolKey() string {
	if leaf, err := pki.LeafDER(x.cert); err == nil {
		return "x509:" + pki.ThumbprintHex(leaf)
	}
	return "x509:" + fmt.Sprintf("%x", sha256.Sum256(x.cert))
}

func (x *x509Identity) secretHash() [sha256.Size]byte {
	if x.key == nil {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256(x.key.N.Bytes())
}

func (x *x509Identity) validate() error {
	if len(x.cert) == 0 || x.key == nil {
		return errors.New("X.509 identity needs a certificate and its private key")
	}
	leaf, err := pki.LeafDER(x.cert)
	if err != nil {
		return fmt.Errorf("X.509 user certificate: %w", err)
	}
	c, err := x509.ParseCertificate(leaf)
	if err != nil {
		return fmt.Errorf("X.509 user certificate: %w", err)
	}
	if pub, ok := c.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&x.key.PublicKey) {
		return errors.New("X.509 user key does not belong to the certificate")
	}
	return nil
}
