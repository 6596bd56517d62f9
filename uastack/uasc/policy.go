package uasc

import (
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"fmt"
	"hash"
	"slices"
	"strings"
)

// Security policy URIs (OPC UA Part 7, "SecurityPolicy" profiles).
const (
	SecurityPolicyNone                = "http://opcfoundation.org/UA/SecurityPolicy#None"
	SecurityPolicyBasic128Rsa15       = "http://opcfoundation.org/UA/SecurityPolicy#Basic128Rsa15"
	SecurityPolicyBasic256            = "http://opcfoundation.org/UA/SecurityPolicy#Basic256"
	SecurityPolicyBasic256Sha256      = "http://opcfoundation.org/UA/SecurityPolicy#Basic256Sha256"
	SecurityPolicyAes128Sha256RsaOaep = "http://opcfoundation.org/UA/SecurityPolicy#Aes128_Sha256_RsaOaep"
	SecurityPolicyAes256Sha256RsaPss  = "http://opcfoundation.org/UA/SecurityPolicy#Aes256_Sha256_RsaPss"
)

// Algorithm URIs (Part 7). The asymmetric signature URI goes into
// SignatureData.Algorithm, the asymmetric encryption URI into
// UserIdentityToken.EncryptionAlgorithm.
const (
	AlgRsaSha1         = "http://www.w3.org/2000/09/xmldsig#rsa-sha1"
	AlgRsaSha256       = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
	AlgRsaPssSha256    = "http://opcfoundation.org/UA/security/rsa-pss-sha2-256"
	AlgRsa15           = "http://www.w3.org/2001/04/xmlenc#rsa-1_5"
	AlgRsaOaep         = "http://www.w3.org/2001/04/xmlenc#rsa-oaep"
	AlgRsaOaepSha256   = "http://opcfoundation.org/UA/security/rsa-oaep-sha2-256"
	AlgHmacSha1        = "http://www.w3.org/2000/09/xmldsig#hmac-sha1"
	AlgHmacSha256      = "http://www.w3.org/2000/09/xmldsig#hmac-sha256"
	AlgAes128Cbc       = "http://www.w3.org/2001/04/xmlenc#aes128-cbc"
	AlgAes256Cbc       = "http://www.w3.org/2001/04/xmlenc#aes256-cbc"
	AlgPSha1           = "http://docs.oasis-open.org/ws-sx/ws-secureconversation/200512/dk/p_sha1"
	AlgPSha256         = "http://docs.oasis-open.org/ws-sx/ws-secureconversation/200512/dk/p_sha256"
	aesBlockSize       = 16
	rsaExtraPaddingMin = 2048/8 + 1 // keys larger than 2048 bits need ExtraPaddingSize
)

// AsymSignature is an asymmetric signature algorithm.
type AsymSignature uint8

const (
	AsymSignatureNone AsymSignature = iota
	RsaPkcs15Sha1                   // RSASSA-PKCS1-v1_5 with SHA-1
	RsaPkcs15Sha256                 // RSASSA-PKCS1-v1_5 with SHA-256
	RsaPssSha256                    // RSASSA-PSS with SHA-256, MGF1-SHA-256, 32-byte salt
)

func (a AsymSignature) hash() crypto.Hash {
	if a == RsaPkcs15Sha1 {
		return crypto.SHA1
	}
	return crypto.SHA256
}

func (a AsymSignature) String() string {
	return [...]string{"None", "RSA-PKCS1v15-SHA1", "RSA-PKCS1v15-SHA256", "RSA-PSS-SHA256"}[a]
}

// AsymEncryption is an asymmetric encryption algorithm.
type AsymEncryption uint8

const (
	AsymEncryptionNone AsymEncryption = iota
	RsaPkcs15                         // RSAES-PKCS1-v1_5
	RsaOaepSha1                       // RSAES-OAEP with SHA-1
	RsaOaepSha256                     // RSAES-OAEP with SHA-256
)

// Overhead is the number of bytes of each RSA block the padding takes:
// 11 for PKCS#1 v1.5, 2·hLen+2 for OAEP (42 with SHA-1, 66 with SHA-256).
func (a AsymEncryption) Overhead() int {
	switch a {
	case RsaPkcs15:
		return 11
	case RsaOaepSha1:
		return 2*sha1.Size + 2
	case RsaOaepSha256:
		return 2*sha256.Size + 2
	}
	return 0
}

func (a AsymEncryption) String() string {
	return [...]string{"None", "RSA-PKCS1v15", "RSA-OAEP-SHA1", "RSA-OAEP-SHA256"}[a]
}

// Policy is one OPC UA security policy: its algorithms, key lengths and sizes, and
// the cryptographic operations built on them. Policies come from PolicyByURI or
// Policies; they are shared and must not be modified. A Policy is safe for
// concurrent use; the SymCipher it makes is not.
type Policy struct {
	URI        string
	Name       string // the fragment of the URI: "Basic256Sha256"
	Deprecated bool   // deprecated by OPC UA 1.04; use only when explicitly configured

	AsymSignature     AsymSignature
	AsymSignatureURI  string
	AsymEncryption    AsymEncryption
	AsymEncryptionURI string
	MinAsymKeyBits    int
	MaxAsymKeyBits    int

	SymSignatureURI        string
	SymSignatureHash       crypto.Hash // HMAC hash
	SymSignatureKeyLength  int         // DerivedSignatureKeyLength, bytes
	SymSignatureSize       int         // HMAC output, bytes
	SymEncryptionURI       string
	SymEncryptionKeyLength int // AES key, bytes
	SymBlockSize           int // AES block, bytes

	KeyDerivationURI  string
	KeyDerivationHash crypto.Hash // P_SHA1 or P_SHA256
	NonceLength       int         // SecureChannelNonceLength, bytes
}

// The table of policies, None first, then roughly by strength. One literal per
// policy: everything a policy is, is here.
var policies = []*Policy{
	{
		URI:  SecurityPolicyNone,
		Name: "None",
	},
	{
		URI: SecurityPolicyBasic128Rsa15, Name: "Basic128Rsa15", Deprecated: true,
		AsymSignature: RsaPkcs15Sha1, AsymSignatureURI: AlgRsaSha1,
		AsymEncryption: RsaPkcs15, AsymEncryptionURI: AlgRsa15,
		MinAsymKeyBits: 1024, MaxAsymKeyBits: 2048,
		SymSignatureURI: AlgHmacSha1, SymSignatureHash: crypto.SHA1, SymSignatureKeyLength: 16, SymSignatureSize: sha1.Size,
		SymEncryptionURI: AlgAes128Cbc, SymEncryptionKeyLength: 16, SymBlockSize: aesBlockSize,
		KeyDerivationURI: AlgPSha1, KeyDerivationHash: crypto.SHA1,
		NonceLength: 16,
	},
	{
		URI: SecurityPolicyBasic256, Name: "Basic256", Deprecated: true,
		AsymSignature: RsaPkcs15Sha1, AsymSignatureURI: AlgRsaSha1,
		AsymEncryption: RsaOaepSha1, AsymEncryptionURI: AlgRsaOaep,
		MinAsymKeyBits: 1024, MaxAsymKeyBits: 2048,
		SymSignatureURI: AlgHmacSha1, SymSignatureHash: crypto.SHA1, SymSignatureKeyLength: 24, SymSignatureSize: sha1.Size,
		SymEncryptionURI: AlgAes256Cbc, SymEncryptionKeyLength: 32, SymBlockSize: aesBlockSize,
		KeyDerivationURI: AlgPSha1, KeyDerivationHash: crypto.SHA1,
		NonceLength: 32,
	},
	{
		URI: SecurityPolicyAes128Sha256RsaOaep, Name: "Aes128_Sha256_RsaOaep",
		AsymSignature: RsaPkcs15Sha256, AsymSignatureURI: AlgRsaSha256,
		AsymEncryption: RsaOaepSha1, AsymEncryptionURI: AlgRsaOaep,
		MinAsymKeyBits: 2048, MaxAsymKeyBits: 4096,
		SymSignatureURI: AlgHmacSha256, SymSignatureHash: crypto.SHA256, SymSignatureKeyLength: 32, SymSignatureSize: sha256.Size,
		SymEncryptionURI: AlgAes128Cbc, SymEncryptionKeyLength: 16, SymBlockSize: aesBlockSize,
		KeyDerivationURI: AlgPSha256, KeyDerivationHash: crypto.SHA256,
		NonceLength: 32,
	},
	{
		URI: SecurityPolicyBasic256Sha256, Name: "Basic256Sha256",
		AsymSignature: RsaPkcs15Sha256, AsymSignatureURI: AlgRsaSha256,
		AsymEncryption: RsaOaepSha1, AsymEncryptionURI: AlgRsaOaep,
		MinAsymKeyBits: 2048, MaxAsymKeyBits: 4096,
		SymSignatureURI: AlgHmacSha256, SymSignatureHash: crypto.SHA256, SymSignatureKeyLength: 32, SymSignatureSize: sha256.Size,
		SymEncryptionURI: AlgAes256Cbc, SymEncryptionKeyLength: 32, SymBlockSize: aesBlockSize,
		KeyDerivationURI: AlgPSha256, KeyDerivationHash: crypto.SHA256,
		NonceLength: 32,
	},
	{
		URI: SecurityPolicyAes256Sha256RsaPss, Name: "Aes256_Sha256_RsaPss",
		AsymSignature: RsaPssSha256, AsymSignatureURI: AlgRsaPssSha256,
		AsymEncryption: RsaOaepSha256, AsymEncryptionURI: AlgRsaOaepSha256,
		MinAsymKeyBits: 2048, MaxAsymKeyBits: 4096,
		SymSignatureURI: AlgHmacSha256, SymSignatureHash: crypto.SHA256, SymSignatureKeyLength: 32, SymSignatureSize: sha256.Size,
		SymEncryptionURI: AlgAes256Cbc, SymEncryptionKeyLength: 32, SymBlockSize: aesBlockSize,
		KeyDerivationURI: AlgPSha256, KeyDerivationHash: crypto.SHA256,
		NonceLength: 32,
	},
}

// PolicyByURI returns the policy with the given URI.
func PolicyByURI(uri string) (*Policy, error) {
	for _, p := range policies {
		if p.URI == uri {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownPolicy, uri)
}

// PolicyByName returns the policy given by its URI or its short name
// (case-insensitive: "None", "Basic256Sha256", "Aes128_Sha256_RsaOaep",
// "Aes256_Sha256_RsaPss", "Basic128Rsa15", "Basic256").
func PolicyByName(s string) (*Policy, error) {
	for _, p := range policies {
		if s == p.URI || strings.EqualFold(s, p.Name) {
			return p, nil
		}
	}
	names := make([]string, len(policies))
	for i, p := range policies {
		names[i] = p.Name
	}
	return nil, fmt.Errorf("%w: %q (want one of %s, or a full policy URI)", ErrUnknownPolicy, s, strings.Join(names, ", "))
}

// Policies returns all supported policies, None first, then roughly by strength.
func Policies() []*Policy { return slices.Clone(policies) }

// IsNone reports whether this is SecurityPolicy#None.
func (p *Policy) IsNone() bool { return p.AsymSignature == AsymSignatureNone }

func (p *Policy) String() string { return p.Name }

// NewNonce returns a fresh random nonce of NonceLength bytes (nil for None).
func (p *Policy) NewNonce() ([]byte, error) {
	if p.NonceLength == 0 {
		return nil, nil
	}
	b := make([]byte, p.NonceLength)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("uasc: nonce: %w", err)
	}
	return b, nil
}

// CheckNonce checks the length of a nonce received from the peer.
func (p *Policy) CheckNonce(nonce []byte) error {
	if p.IsNone() || len(nonce) == p.NonceLength {
		return nil
	}
	return fmt.Errorf("%w: %d bytes, %s needs %d", ErrNonce, len(nonce), p.Name, p.NonceLength)
}

// --- asymmetric -------------------------------------------------------------

// CheckAsymKey checks an RSA key's size against MinAsymKeyBits..MaxAsymKeyBits.
func (p *Policy) CheckAsymKey(pub *rsa.PublicKey) error {
	if p.IsNone() {
		return ErrPolicyNone
	}
	if pub == nil || pub.N == nil {
		return fmt.Errorf("%w: no key", ErrKeyLength)
	}
	if bits := pub.N.BitLen(); bits < p.MinAsymKeyBits || bits > p.MaxAsymKeyBits {
		return fmt.Errorf("%w: %d bits, %s allows %d to %d", ErrKeyLength, bits, p.Name, p.MinAsymKeyBits, p.MaxAsymKeyBits)
	}
	return nil
}

// AsymSignatureSize is the size of a signature made with key: the key size in bytes.
func (p *Policy) AsymSignatureSize(pub *rsa.PublicKey) int {
	if p.IsNone() {
		return 0
	}
	return pub.Size()
}

// AsymPlaintextBlockSize is how many plaintext bytes one RSA block encrypted for
// pub carries: the key size minus the padding overhead.
func (p *Policy) AsymPlaintextBlockSize(pub *rsa.PublicKey) int {
	if p.IsNone() {
		return 1
	}
	return pub.Size() - p.AsymEncryption.Overhead()
}

// AsymCiphertextBlockSize is the size of one encrypted RSA block: the key size.
func (p *Policy) AsymCiphertextBlockSize(pub *rsa.PublicKey) int {
	if p.IsNone() {
		return 1
	}
	return pub.Size()
}

// AsymEncryptedSize is the ciphertext size for n plaintext bytes encrypted for pub.
func (p *Policy) AsymEncryptedSize(pub *rsa.PublicKey, n int) int {
	if p.IsNone() {
		return n
	}
	pb := p.AsymPlaintextBlockSize(pub)
	return (n + pb - 1) / pb * pub.Size()
}

// AsymExtraPadding reports whether chunks encrypted for pub carry the
// ExtraPaddingSize byte: when the key is larger than 2048 bits (Part 6 §6.7.2.2).
func (p *Policy) AsymExtraPadding(pub *rsa.PublicKey) bool {
	return !p.IsNone() && pub.Size() >= rsaExtraPaddingMin
}

// asymDigest hashes data with the signature algorithm's hash into buf.
func (p *Policy) asymDigest(buf *[sha256.Size]byte, data []byte) []byte {
	if p.AsymSignature.hash() == crypto.SHA1 {
		d := sha1.Sum(data)
		return append(buf[:0], d[:]...)
	}
	*buf = sha256.Sum256(data)
	return buf[:]
}

// AsymSign signs data with the policy's asymmetric signature algorithm.
func (p *Policy) AsymSign(key *rsa.PrivateKey, data []byte) ([]byte, error) {
	if p.IsNone() {
		return nil, ErrPolicyNone
	}
	if key == nil {
		return nil, fmt.Errorf("%w: no key", ErrKeyLength)
	}
	if err := p.CheckAsymKey(&key.PublicKey); err != nil {
		return nil, err
	}
	var buf [sha256.Size]byte
	digest := p.asymDigest(&buf, data)
	var sig []byte
	var err error
	if p.AsymSignature == RsaPssSha256 {
		sig, err = rsa.SignPSS(rand.Reader, key, crypto.SHA256, digest, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	} else {
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, p.AsymSignature.hash(), digest)
	}
	if err != nil {
		return nil, fmt.Errorf("uasc: %s sign: %w", p.AsymSignature, err)
	}
	return sig, nil
}

// AsymVerify verifies an asymmetric signature of data made by the owner of pub.
func (p *Policy) AsymVerify(pub *rsa.PublicKey, data, sig []byte) error {
	if p.IsNone() {
		return ErrPolicyNone
	}
	if err := p.CheckAsymKey(pub); err != nil {
		return err
	}
	var buf [sha256.Size]byte
	digest := p.asymDigest(&buf, data)
	var err error
	if p.AsymSignature == RsaPssSha256 {
		// Part 7 fixes the salt at 32 bytes; accept what the signature says, as the
		// other stacks do, since the salt length carries no security weight here.
		err = rsa.VerifyPSS(pub, crypto.SHA256, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto})
	} else {
		err = rsa.VerifyPKCS1v15(pub, p.AsymSignature.hash(), digest, sig)
	}
	if err != nil {
		return fmt.Errorf("%w (%s)", ErrSignature, p.AsymSignature)
	}
	return nil
}

// AsymEncrypt encrypts plaintext for pub, block by block as OPC UA does: each
// AsymPlaintextBlockSize bytes (the last block may be shorter) become one
// key-sized ciphertext block.
func (p *Policy) AsymEncrypt(pub *rsa.PublicKey, plaintext []byte) ([]byte, error) {
	return p.AppendAsymEncrypt(nil, pub, plaintext)
}

// AppendAsymEncrypt is AsymEncrypt appending the ciphertext to dst.
func (p *Policy) AppendAsymEncrypt(dst []byte, pub *rsa.PublicKey, plaintext []byte) ([]byte, error) {
	if p.IsNone() {
		return nil, ErrPolicyNone
	}
	if err := p.CheckAsymKey(pub); err != nil {
		return nil, err
	}
	dst = slices.Grow(dst, p.AsymEncryptedSize(pub, len(plaintext)))
	pb := p.AsymPlaintextBlockSize(pub)
	for len(plaintext) > 0 {
		n := min(pb, len(plaintext))
		var c []byte
		var err error
		switch p.AsymEncryption {
		case RsaPkcs15:
			// Deprecated in crypto/rsa and in OPC UA alike; Basic128Rsa15 needs it.
			//lint:ignore SA1019 Basic128Rsa15 is defined with RSA-PKCS1-v1_5 encryption.
			c, err = rsa.EncryptPKCS1v15(rand.Reader, pub, plaintext[:n])
		case RsaOaepSha1:
			c, err = rsa.EncryptOAEP(sha1.New(), rand.Reader, pub, plaintext[:n], nil)
		default:
			c, err = rsa.EncryptOAEP(sha256.New(), rand.Reader, pub, plaintext[:n], nil)
		}
		if err != nil {
			return nil, fmt.Errorf("uasc: %s encrypt: %w", p.AsymEncryption, err)
		}
		dst = append(dst, c...)
		plaintext = plaintext[n:]
	}
	return dst, nil
}

// AsymDecrypt decrypts ciphertext made by AsymEncrypt with key, block by block.
func (p *Policy) AsymDecrypt(key *rsa.PrivateKey, ciphertext []byte) ([]byte, error) {
	return p.AppendAsymDecrypt(nil, key, ciphertext)
}

// AppendAsymDecrypt is AsymDecrypt appending the plaintext to dst.
func (p *Policy) AppendAsymDecrypt(dst []byte, key *rsa.PrivateKey, ciphertext []byte) ([]byte, error) {
	if p.IsNone() {
		return nil, ErrPolicyNone
	}
	if key == nil {
		return nil, fmt.Errorf("%w: no key", ErrKeyLength)
	}
	if err := p.CheckAsymKey(&key.PublicKey); err != nil {
		return nil, err
	}
	cb := key.Size()
	if len(ciphertext)%cb != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a multiple of the %d-byte RSA block", ErrDecrypt, len(ciphertext), cb)
	}
	dst = slices.Grow(dst, len(ciphertext)/cb*p.AsymPlaintextBlockSize(&key.PublicKey))
	for ; len(ciphertext) > 0; ciphertext = ciphertext[cb:] {
		var m []byte
		var err error
		switch p.AsymEncryption {
		case RsaPkcs15:
			// Whether this fails is a Bleichenbacher oracle; that is why OPC UA 1.04
			// deprecated Basic128Rsa15, which is offered only when configured.
			//lint:ignore SA1019 Basic128Rsa15 is defined with RSA-PKCS1-v1_5 encryption.
			m, err = rsa.DecryptPKCS1v15(nil, key, ciphertext[:cb])
		case RsaOaepSha1:
			m, err = rsa.DecryptOAEP(sha1.New(), nil, key, ciphertext[:cb], nil)
		default:
			m, err = rsa.DecryptOAEP(sha256.New(), nil, key, ciphertext[:cb], nil)
		}
		if err != nil {
			return nil, ErrDecrypt
		}
		dst = append(dst, m...)
	}
	return dst, nil
}

// --- symmetric keys ---------------------------------------------------------

// SymKeys are the keys of one direction of a secure channel token.
type SymKeys struct {
	SigningKey    []byte
	EncryptingKey []byte
	IV            []byte
}

// Clear overwrites the keys with zeros; call it once the SymCipher is built.
func (k *SymKeys) Clear() {
	clear(k.SigningKey)
	clear(k.EncryptingKey)
	clear(k.IV)
}

// DeriveKeys derives one direction's keys (Part 6 §6.7.5): P_SHA(secret, seed)
// cut into SymSignatureKeyLength signing key, SymEncryptionKeyLength encrypting key
// and SymBlockSize IV bytes. The keys a client signs and encrypts with are
// DeriveKeys(serverNonce, clientNonce); the server's are
// DeriveKeys(clientNonce, serverNonce). ChannelKeys does both.
func (p *Policy) DeriveKeys(secret, seed []byte) SymKeys {
	if p.IsNone() {
		return SymKeys{}
	}
	sl, el, bl := p.SymSignatureKeyLength, p.SymEncryptionKeyLength, p.SymBlockSize
	out := PHash(p.KeyDerivationHash.New, secret, seed, sl+el+bl)
	return SymKeys{
		SigningKey:    out[:sl:sl],
		EncryptingKey: out[sl : sl+el : sl+el],
		IV:            out[sl+el:],
	}
}

// ChannelKeys derives both directions' keys of a token from the nonces exchanged
// in OpenSecureChannel: client are the keys the client signs and encrypts with
// (and the server verifies and decrypts with), server the other way round.
func (p *Policy) ChannelKeys(clientNonce, serverNonce []byte) (client, server SymKeys) {
	return p.DeriveKeys(serverNonce, clientNonce), p.DeriveKeys(clientNonce, serverNonce)
}

// PHash is the P_hash pseudo-random function of RFC 5246 §5 (P_SHA1, P_SHA256 in
// OPC UA): HMAC(secret, A(1)+seed) ‖ HMAC(secret, A(2)+seed) ‖ …, with
// A(0) = seed and A(i) = HMAC(secret, A(i-1)), cut to length bytes.
func PHash(h func() hash.Hash, secret, seed []byte, length int) []byte {
	mac := hmac.New(h, secret)
	out := make([]byte, 0, length+mac.Size())
	mac.Write(seed)
	a := mac.Sum(nil) // A(1)
	for len(out) < length {
		mac.Reset()
		mac.Write(a)
		mac.Write(seed)
		out = mac.Sum(out)
		mac.Reset()
		mac.Write(a)
		a = mac.Sum(a[:0])
	}
	return out[:length:length]
}
