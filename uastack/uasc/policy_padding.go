package uasc

import "fmt"

// Chunk padding (Part 6 §6.7.2.2). An encrypted chunk's plaintext is
//
//	sequence header ‖ body ‖ PaddingSize ‖ Padding ‖ [ExtraPaddingSize] ‖ signature
//
// and its length must be a multiple of the plaintext block size (the AES block
// size for symmetric encryption, the RSA key size minus the padding overhead for
// asymmetric). PaddingSize is one byte: the low byte of the padding length; each
// Padding byte repeats it; ExtraPaddingSize, the high byte, is present only when the
// encrypting key is larger than 2048 bits (asymmetric chunks only: AES keys never
// are). Chunks that are only signed carry no padding.

// PaddingOverhead is the number of size bytes the padding carries: PaddingSize and,
// with extra, ExtraPaddingSize.
func PaddingOverhead(extra bool) int {
	if extra {
		return 2
	}
	return 1
}

// PaddingSize returns the value of the PaddingSize field (the number of Padding
// bytes) for n bytes of sequence header and body, sigSize bytes of signature and the
// given plaintext block size. The total padding appended is
// PaddingSize + PaddingOverhead(extra) bytes.
func PaddingSize(n, plainBlockSize, sigSize int, extra bool) int {
	if plainBlockSize <= 1 {
		return 0
	}
	rem := (n + sigSize + PaddingOverhead(extra)) % plainBlockSize
	if rem == 0 {
		return 0
	}
	return plainBlockSize - rem
}

// AppendPadding appends the padding for a PaddingSize of paddingSize to dst. It
// does not allocate when dst has room.
func AppendPadding(dst []byte, paddingSize int, extra bool) []byte {
	lo := byte(paddingSize)
	for i := 0; i <= paddingSize; i++ { // PaddingSize byte + Padding bytes
		dst = append(dst, lo)
	}
	if extra {
		dst = append(dst, byte(paddingSize>>8))
	}
	return dst
}

// ParsePadding reads the padding at the end of plain (a decrypted chunk without its
// signature) and returns the number of bytes it takes, size bytes included; the
// body ends that many bytes before the end. Call it only after the signature
// verified, so malformed padding cannot serve as an oracle.
func ParsePadding(plain []byte, extra bool) (int, error) {
	over := PaddingOverhead(extra)
	if len(plain) < over {
		return 0, fmt.Errorf("%w: chunk too short", ErrPadding)
	}
	size := int(plain[len(plain)-1])
	if extra {
		size = size<<8 | int(plain[len(plain)-2])
	}
	total := size + over
	if total > len(plain) {
		return 0, fmt.Errorf("%w: %d padding bytes in a %d-byte chunk", ErrPadding, total, len(plain))
	}
	lo := byte(size)
	for _, b := range plain[len(plain)-total : len(plain)-over+1] {
		if b != lo {
			return 0, fmt.Errorf("%w: padding byte 0x%02x, want 0x%02x", ErrPadding, b, lo)
		}
	}
	return total, nil
}

// MaxPayloadSize returns how many bytes of sequence header and body fit into a chunk
// of chunkSize bytes whose headers (message header and security header, which are
// never encrypted) take headerSize bytes and whose signature takes sigSize bytes.
// For encrypted chunks give the plaintext and ciphertext block sizes and whether the
// padding has the extra byte; for chunks that are not encrypted give 0 block sizes.
// It returns a value <= 0 when nothing fits.
func MaxPayloadSize(chunkSize, headerSize, sigSize, plainBlockSize, cipherBlockSize int, extra bool) int {
	if plainBlockSize <= 0 || cipherBlockSize <= 0 {
		return chunkSize - headerSize - sigSize
	}
	blocks := (chunkSize - headerSize) / cipherBlockSize
	return blocks*plainBlockSize - sigSize - PaddingOverhead(extra)
}
