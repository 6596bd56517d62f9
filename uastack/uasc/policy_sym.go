package uasc

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"hash"
)

// SymCipher signs, verifies, encrypts and decrypts the chunks of one direction of
// a secure channel token. It is built once per token (NewSymCipher) and then does
// its work without allocating: the HMAC and the AES key schedule are prepared once,
// the CBC modes are rewound to the token's IV for every chunk (OPC UA encrypts each
// chunk on its own, always from the derived IV).
//
// A SymCipher is not safe for concurrent use: a channel has one for what it sends
// and one for what it receives, each used by one goroutine at a time.
type SymCipher struct {
	mac     hash.Hash
	macSize int
	sum     [sha256.Size]byte // Verify computes into this

	block    cipher.Block
	enc, dec cipher.BlockMode
	encIV    ivSetter // nil: enc/dec cannot be rewound, use the generic CBC below
	decIV    ivSetter
	iv       [aesBlockSize]byte
	chain    [aesBlockSize]byte // generic CBC state
	saved    [aesBlockSize]byte
}

// ivSetter is implemented by the standard library's CBC modes (crypto/tls rewinds
// them the same way).
type ivSetter interface{ SetIV(iv []byte) }

// NewSymCipher builds the cipher for keys derived by DeriveKeys or ChannelKeys.
// The keys are copied; the caller may Clear them afterwards.
func (p *Policy) NewSymCipher(k SymKeys) (*SymCipher, error) {
	if p.IsNone() {
		return nil, ErrPolicyNone
	}
	if len(k.SigningKey) != p.SymSignatureKeyLength || len(k.EncryptingKey) != p.SymEncryptionKeyLength || len(k.IV) != p.SymBlockSize {
		return nil, fmt.Errorf("uasc: %s keys have lengths %d/%d/%d, want %d/%d/%d", p.Name,
			len(k.SigningKey), len(k.EncryptingKey), len(k.IV),
			p.SymSignatureKeyLength, p.SymEncryptionKeyLength, p.SymBlockSize)
	}
	block, err := aes.NewCipher(k.EncryptingKey)
	if err != nil {
		return nil, fmt.Errorf("uasc: %w", err)
	}
	c := &SymCipher{
		mac:     hmac.New(p.SymSignatureHash.New, k.SigningKey),
		macSize: p.SymSignatureSize,
		block:   block,
	}
	copy(c.iv[:], k.IV)
	c.enc = cipher.NewCBCEncrypter(block, c.iv[:])
	c.dec = cipher.NewCBCDecrypter(block, c.iv[:])
	encIV, ok1 := c.enc.(ivSetter)
	decIV, ok2 := c.dec.(ivSetter)
	if ok1 && ok2 {
		c.encIV, c.decIV = encIV, decIV
	}
	// The first Reset of an HMAC saves its keyed state, which allocates; do it here
	// rather than on the first chunk.
	c.mac.Reset()
	return c, nil
}

// SignatureSize is the size of the MAC Sign appends.
func (c *SymCipher) SignatureSize() int { return c.macSize }

// BlockSize is the cipher block size; encrypted data is a multiple of it.
func (c *SymCipher) BlockSize() int { return aesBlockSize }

// Sign appends the MAC of data to dst and returns the extended slice. dst may be
// data[:len(data)] (sign a chunk in place); nothing is allocated when dst has room
// for SignatureSize more bytes.
func (c *SymCipher) Sign(dst, data []byte) []byte {
	c.mac.Reset()
	c.mac.Write(data)
	return c.mac.Sum(dst)
}

// Verify reports, in constant time, whether mac is the MAC of data.
func (c *SymCipher) Verify(data, mac []byte) bool {
	if len(mac) != c.macSize {
		return false
	}
	c.mac.Reset()
	c.mac.Write(data)
	return hmac.Equal(c.mac.Sum(c.sum[:0]), mac)
}

// EncryptInPlace encrypts buf with AES-CBC from the token's IV. len(buf) must be a
// multiple of BlockSize (the chunk padding sees to that).
func (c *SymCipher) EncryptInPlace(buf []byte) error {
	if len(buf)%aesBlockSize != 0 {
		return fmt.Errorf("%w: %d bytes", ErrBlockSize, len(buf))
	}
	if c.encIV == nil {
		c.encryptGeneric(buf)
		return nil
	}
	c.encIV.SetIV(c.iv[:])
	c.enc.CryptBlocks(buf, buf)
	return nil
}

// DecryptInPlace decrypts buf with AES-CBC from the token's IV. len(buf) must be a
// multiple of BlockSize.
func (c *SymCipher) DecryptInPlace(buf []byte) error {
	if len(buf)%aesBlockSize != 0 {
		return fmt.Errorf("%w: %d bytes", ErrBlockSize, len(buf))
	}
	if c.decIV == nil {
		c.decryptGeneric(buf)
		return nil
	}
	c.decIV.SetIV(c.iv[:])
	c.dec.CryptBlocks(buf, buf)
	return nil
}

// encryptGeneric is CBC over the bare block cipher, for a cipher.BlockMode that
// cannot be rewound.
func (c *SymCipher) encryptGeneric(buf []byte) {
	prev := c.iv[:]
	for i := 0; i < len(buf); i += aesBlockSize {
		b := buf[i : i+aesBlockSize]
		subtleXOR(b, prev)
		c.block.Encrypt(b, b)
		prev = b
	}
}

func (c *SymCipher) decryptGeneric(buf []byte) {
	c.chain = c.iv
	for i := 0; i < len(buf); i += aesBlockSize {
		b := buf[i : i+aesBlockSize]
		copy(c.saved[:], b)
		c.block.Decrypt(b, b)
		subtleXOR(b, c.chain[:])
		c.chain = c.saved
	}
}

func subtleXOR(dst, src []byte) {
	for i := range dst {
		dst[i] ^= src[i]
	}
}
