package storelog

import (
	"encoding/binary"
	"reflect"
	"sync/atomic"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// Trimmed page writes.
//
// bbolt writes every page a transaction changed whole: with the log's
// 32 KiB pages a commit of one publish response's records (~120 KiB) wrote
// 256–320 KiB, because besides the records' leaves it rewrites the
// stream's branch page, the leaves of the buckets above it and the meta
// page, each holding a few hundred bytes, each written as 32 KiB. What
// reaches the file is what the kernel copies, marks dirty and the fdatasync
// sends to the disk: disk bandwidth, and wear on an edge box's flash (the
// CPU of a commit moved less than the noise on the machine measured).
//
// A page is read only as far as its elements reach (bbolt's page format:
// a 16-byte header of id, flags, count and overflow; then count element
// headers of 16 bytes, each with its key's, and on a leaf its value's,
// offset from the element and length; a meta page holds its 64 bytes after
// the header). So the log gives bbolt a page writer that writes a
// one-page branch, leaf or meta page only up to its last used byte,
// rounded up to a 4 KiB block (a partial block would make the kernel read
// the rest of it first). The stale bytes past it, from the page's earlier
// use, are never read: not by bbolt's reads, its freelist rebuild at open
// (NoFreelistSync) nor its consistency check (TestTrimmedPagesReopen runs
// it). A page of several (overflow), a freelist page or anything not
// recognised is written whole. A trimmed page at the file's end does not
// leave the file short: bbolt grows the file over every page a commit
// allocated before it writes them (DB.grow; NoGrowSync stays off).
//
// bbolt has no option for it: the writer is its unexported field
// DB.ops.writeAt, replaced once after Open through reflect (the field's
// name and type are checked; when a bbolt upgrade changes them the log
// writes whole pages as before, and TestTrimmedPageWrites fails).

// bbolt's page format (go.etcd.io/bbolt/internal/common/page.go).
const (
	pageHeaderSize  = 16
	pageElementSize = 16 // branchPageElement and leafPageElement alike
	metaSize        = 64
	branchPageFlag  = 0x01
	leafPageFlag    = 0x02
	metaPageFlag    = 0x04
	// writeBlock is what a trimmed write is rounded up to: the page
	// cache's and the file system's block.
	writeBlock = 4 << 10
)

// usedLen is how much of buf, a page bbolt writes whole, holds what is
// read: the header and elements of a one-page branch or leaf, or a meta
// page, rounded up to writeBlock; len(buf) for anything else.
func usedLen(buf []byte, pageSize int) int {
	if len(buf) != pageSize || len(buf) < pageHeaderSize {
		return len(buf)
	}
	flags := binary.LittleEndian.Uint16(buf[8:])
	count := int(binary.LittleEndian.Uint16(buf[10:]))
	if binary.LittleEndian.Uint32(buf[12:]) != 0 { // overflow: written whole
		return len(buf)
	}
	end := pageHeaderSize
	switch flags {
	case metaPageFlag:
		end += metaSize
	case branchPageFlag, leafPageFlag:
		end += count * pageElementSize
		if end > len(buf) {
			return len(buf)
		}
		for i := range count {
			e := pageHeaderSize + i*pageElementSize
			var pos, size uint64
			if flags == leafPageFlag { // flags, pos, ksize, vsize
				pos = uint64(binary.LittleEndian.Uint32(buf[e+4:]))
				size = uint64(binary.LittleEndian.Uint32(buf[e+8:])) + uint64(binary.LittleEndian.Uint32(buf[e+12:]))
			} else { // pos, ksize, pgid
				pos = uint64(binary.LittleEndian.Uint32(buf[e:]))
				size = uint64(binary.LittleEndian.Uint32(buf[e+4:]))
			}
			if x := uint64(e) + pos + size; x > uint64(len(buf)) {
				return len(buf)
			} else if int(x) > end {
				end = int(x)
			}
		}
	default:
		return len(buf)
	}
	return min((end+writeBlock-1)/writeBlock*writeBlock, len(buf))
}

// trimPageWrites replaces db's page writer with one writing each page as
// far as usedLen says, counting the bytes it writes in written; false when
// bbolt's writer is not where this expects it (db then writes as before).
func trimPageWrites(db *bolt.DB, pageSize int, written *atomic.Uint64) bool {
	type writeAt = func(b []byte, off int64) (int, error)
	ops := reflect.ValueOf(db).Elem().FieldByName("ops")
	if !ops.IsValid() || ops.Kind() != reflect.Struct {
		return false
	}
	f := ops.FieldByName("writeAt")
	if !f.IsValid() || f.Type() != reflect.TypeFor[writeAt]() {
		return false
	}
	p := (*writeAt)(unsafe.Pointer(f.UnsafeAddr()))
	write := *p
	if write == nil {
		return false
	}
	*p = func(b []byte, off int64) (int, error) {
		n, err := write(b[:usedLen(b, pageSize)], off)
		written.Add(uint64(n))
		if err != nil {
			return n, err
		}
		return len(b), nil
	}
	return true
}
