package pki

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// The trust lists (trusted/ and issuers/, certificates and CRLs) are parsed once and
// kept until a folder changes. A change is seen by a stat of every file in the
// folder: its name, size and modification time. That costs one directory read and
// a stat per file per validation, instead of reading and parsing every certificate
// and CRL for every secure channel a peer opens; and it sees what an operator does
// by hand: a file moved in or out (the folder's listing changes), a CRL copied over
// the old one in place (its size or mtime changes).

// fileSig identifies one version of a file in a folder.
type fileSig struct {
	name string
	size int64
	mod  int64 // modification time, UnixNano
}

// folderCache is the parsed content of one folder and the signature of the
// folder it was parsed from.
type folderCache[T any] struct {
	mu    sync.Mutex
	valid bool
	sig   []fileSig
	items []T
}

// trustCache holds the folders Validate reads.
type trustCache struct {
	trusted, issuers       folderCache[*x509.Certificate]
	trustedCRL, issuersCRL folderCache[*x509.RevocationList]
}

// certCache returns the cache of a certificate folder, nil for folders that are
// not cached (own/, rejected/).
func (s *Store) certCache(f Folder) *folderCache[*x509.Certificate] {
	switch f {
	case FolderTrusted:
		return &s.cache.trusted
	case FolderIssuers:
		return &s.cache.issuers
	}
	return nil
}

func (s *Store) crlCache(rel string) *folderCache[*x509.RevocationList] {
	switch rel {
	case dirTrustedCRL:
		return &s.cache.trustedCRL
	case dirIssuerCRL:
		return &s.cache.issuersCRL
	}
	return nil
}

// folderSig lists the regular, non-hidden files of dir with their size and
// mtime, sorted by name. Symbolic links are followed, so that replacing the file a
// link points to counts as a change.
func folderSig(dir string) ([]fileSig, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	sig := make([]fileSig, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil || info.IsDir() {
			continue // removed meanwhile, or a dangling link: not part of the list
		}
		sig = append(sig, fileSig{name: e.Name(), size: info.Size(), mod: info.ModTime().UnixNano()})
	}
	return sig, nil
}

// loadFolder returns the parsed files of dir, from c when the folder has not
// changed since c was filled. read parses one file; files it fails on are
// skipped with a warning (once per version of the file, when it is parsed). The
// result is shared: callers must not modify it (it is clipped, so append copies).
func loadFolder[T any](s *Store, c *folderCache[T], dir string, read func(string) ([]T, error), what string) []T {
	sig, err := folderSig(dir)
	if err != nil {
		s.log.Warn("pki: cannot read folder", "dir", dir, "err", err)
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.valid && slices.Equal(c.sig, sig) {
		return c.items
	}
	// Parsing under the folder's lock keeps concurrent validations from parsing
	// the same change twice; it happens once per change.
	var out []T
	for _, f := range sig {
		p := filepath.Join(dir, f.name)
		items, err := read(p)
		if err != nil {
			s.log.Warn("pki: skipping unreadable "+what+" file", "file", p, "err", err)
			continue
		}
		out = append(out, items...)
	}
	c.valid, c.sig, c.items = true, sig, slices.Clip(out)
	s.folderLoads.Add(1)
	return c.items
}
