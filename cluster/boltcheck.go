package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// The on-disk layout of a BoltDB file (go.etcd.io/bbolt, file format
// version 2), as far as checkBoltFile needs it. BoltDB writes integers in the
// machine's byte order.
const (
	boltMagic         = 0xED0CDAED
	boltVersion       = 2
	boltPageHeader    = 16 // id uint64, flags uint16, count uint16, overflow uint32
	boltElement       = 16 // branch: pos, ksize uint32, pgid uint64; leaf: flags, pos, ksize, vsize uint32
	boltBucketHeader  = 16 // root pgid uint64, sequence uint64
	boltMetaSize      = 64 // magic, version, pageSize, flags uint32; root bucket; freelist, pgid, txid, checksum uint64
	boltMetaSummed    = 56 // the meta's bytes the checksum covers (all but the checksum)
	boltBranchPage    = 0x01
	boltLeafPage      = 0x02
	boltMetaPage      = 0x04
	boltFreelistPage  = 0x10
	boltBucketLeaf    = 0x01
	boltNoFreelist    = ^uint64(0)
	boltMaxDepth      = 64
	boltMinPageSize   = 512
	boltMaxPageSize   = 1 << 20
	boltFreelistLarge = 0xFFFF
)

var boltOrder = binary.NativeEndian

// ErrStoreDamaged is wrapped by checkBoltFile's errors.
var ErrStoreDamaged = errors.New("raft store is damaged")

// boltMeta is one decoded meta page.
type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high-water mark: pages at or above it are not in use
	txid     uint64
}

// checkBoltFile checks the structure of the BoltDB file at path without
// opening it with BoltDB, whose reads of a damaged file can panic or fault:
// both meta pages must carry BoltDB's magic, version and a valid checksum
// (BoltDB itself falls back to the older meta page when one is bad, which
// silently rolls back the last committed transaction); the file must hold
// every page below the high-water mark; and, like BoltDB's own check, every
// page reachable from the newest meta (bucket trees, overflow pages, the
// freelist) must lie below the high-water mark, carry its own id and a valid
// type, hold its elements within its bounds, be referenced once, and not be
// in the freelist. It reads the file with ReadAt, bounds-checking everything,
// and returns an error wrapping ErrStoreDamaged that says what is wrong.
func checkBoltFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	c := &boltChecker{f: f, size: info.Size(), seen: map[uint64]bool{}, free: map[uint64]bool{}}
	return c.check()
}

type boltChecker struct {
	f        io.ReaderAt
	size     int64
	pageSize int64
	hwm      uint64
	seen     map[uint64]bool
	free     map[uint64]bool
}

// storeDamage is an error that is ErrStoreDamaged without repeating it.
type storeDamage struct{ msg string }

func (e *storeDamage) Error() string        { return e.msg }
func (e *storeDamage) Is(target error) bool { return target == ErrStoreDamaged }

func damaged(format string, args ...any) error {
	return &storeDamage{msg: fmt.Sprintf(format, args...)}
}

func (c *boltChecker) check() error {
	m0, err := c.meta(0, 0)
	if err != nil {
		return err
	}
	m1, err := c.meta(1, int64(m0.pageSize))
	if err != nil {
		return err
	}
	if m0.pageSize != m1.pageSize {
		return damaged("meta pages disagree on the page size (%d and %d)", m0.pageSize, m1.pageSize)
	}
	m := m0
	if m1.txid > m0.txid {
		m = m1
	}
	c.pageSize = int64(m.pageSize)
	c.hwm = m.pgid
	if m.pgid < 3 {
		return damaged("high-water mark %d is below the first data page", m.pgid)
	}
	if need := int64(m.pgid) * c.pageSize; c.size < need || need/c.pageSize != int64(m.pgid) {
		return damaged("file is %d bytes but its meta page needs %d pages of %d bytes (truncated?)", c.size, m.pgid, c.pageSize)
	}
	c.seen[0], c.seen[1] = true, true
	if m.freelist != boltNoFreelist {
		if err := c.freelist(m.freelist); err != nil {
			return err
		}
	}
	return c.tree(m.root, 0, "root bucket")
}

// meta reads and validates meta page id at offset off.
func (c *boltChecker) meta(id uint64, off int64) (boltMeta, error) {
	buf := make([]byte, boltPageHeader+boltMetaSize)
	if _, err := c.f.ReadAt(buf, off); err != nil {
		return boltMeta{}, damaged("meta page %d: cannot read %d bytes at offset %d: %v", id, len(buf), off, err)
	}
	if got := boltOrder.Uint64(buf); got != id {
		return boltMeta{}, damaged("meta page %d: page says it is page %d", id, got)
	}
	if flags := boltOrder.Uint16(buf[8:]); flags != boltMetaPage {
		return boltMeta{}, damaged("meta page %d: page type %#x is not a meta page", id, flags)
	}
	b := buf[boltPageHeader:]
	if v := boltOrder.Uint32(b); v != boltMagic {
		return boltMeta{}, damaged("meta page %d: magic %#x is not BoltDB's", id, v)
	}
	if v := boltOrder.Uint32(b[4:]); v != boltVersion {
		return boltMeta{}, damaged("meta page %d: file format version %d, not %d", id, v, boltVersion)
	}
	h := fnv.New64a()
	_, _ = h.Write(b[:boltMetaSummed])
	if sum, stored := h.Sum64(), boltOrder.Uint64(b[boltMetaSummed:]); sum != stored {
		return boltMeta{}, damaged("meta page %d: checksum %#x does not match its contents (%#x)", id, stored, sum)
	}
	m := boltMeta{
		pageSize: boltOrder.Uint32(b[8:]),
		root:     boltOrder.Uint64(b[16:]),
		freelist: boltOrder.Uint64(b[32:]),
		pgid:     boltOrder.Uint64(b[40:]),
		txid:     boltOrder.Uint64(b[48:]),
	}
	if m.pageSize < boltMinPageSize || m.pageSize > boltMaxPageSize || m.pageSize&(m.pageSize-1) != 0 {
		return boltMeta{}, damaged("meta page %d: page size %d", id, m.pageSize)
	}
	if m.root >= m.pgid {
		return boltMeta{}, damaged("meta page %d: root page %d is above the high-water mark %d", id, m.root, m.pgid)
	}
	if m.freelist != boltNoFreelist && m.freelist >= m.pgid {
		return boltMeta{}, damaged("meta page %d: freelist page %d is above the high-water mark %d", id, m.freelist, m.pgid)
	}
	return m, nil
}

// page reads page id with its overflow pages and marks them in use.
func (c *boltChecker) page(id uint64, what string) ([]byte, error) {
	if id < 2 || id >= c.hwm {
		return nil, damaged("%s: page %d is outside the data pages (2..%d)", what, id, c.hwm-1)
	}
	hdr := make([]byte, boltPageHeader)
	if _, err := c.f.ReadAt(hdr, int64(id)*c.pageSize); err != nil {
		return nil, damaged("%s: cannot read page %d: %v", what, id, err)
	}
	if got := boltOrder.Uint64(hdr); got != id {
		return nil, damaged("%s: page %d says it is page %d", what, id, got)
	}
	overflow := uint64(boltOrder.Uint32(hdr[12:]))
	if overflow >= c.hwm-id {
		return nil, damaged("%s: page %d overflows by %d pages past the high-water mark %d", what, id, overflow, c.hwm)
	}
	for p := id; p <= id+overflow; p++ {
		if c.seen[p] {
			return nil, damaged("%s: page %d is referenced twice", what, p)
		}
		if c.free[p] {
			return nil, damaged("%s: page %d is in use and in the freelist", what, p)
		}
		c.seen[p] = true
	}
	buf := make([]byte, int64(overflow+1)*c.pageSize)
	if _, err := c.f.ReadAt(buf, int64(id)*c.pageSize); err != nil {
		return nil, damaged("%s: cannot read page %d (%d bytes): %v", what, id, len(buf), err)
	}
	return buf, nil
}

func (c *boltChecker) freelist(id uint64) error {
	buf, err := c.page(id, "freelist")
	if err != nil {
		return err
	}
	if flags := boltOrder.Uint16(buf[8:]); flags != boltFreelistPage {
		return damaged("freelist: page %d has type %#x", id, flags)
	}
	count, start := uint64(boltOrder.Uint16(buf[10:])), uint64(boltPageHeader)
	if count == boltFreelistLarge {
		count, start = boltOrder.Uint64(buf[boltPageHeader:]), boltPageHeader+8
	}
	if count > (uint64(len(buf))-start)/8 {
		return damaged("freelist: page %d lists %d pages, more than it can hold", id, count)
	}
	for i := range count {
		p := boltOrder.Uint64(buf[start+8*i:])
		if p < 2 || p >= c.hwm {
			return damaged("freelist: free page %d is outside the data pages (2..%d)", p, c.hwm-1)
		}
		if c.free[p] {
			return damaged("freelist: page %d is listed twice", p)
		}
		if c.seen[p] {
			return damaged("freelist: page %d is in use and in the freelist", p)
		}
		c.free[p] = true
	}
	return nil
}

// tree checks the bucket tree whose root is page id.
func (c *boltChecker) tree(id uint64, depth int, what string) error {
	buf, err := c.page(id, what)
	if err != nil {
		return err
	}
	return c.node(buf, depth, fmt.Sprintf("%s page %d", what, id))
}

// node checks one branch or leaf page held in buf (a page read from the file
// or an inline bucket's page) and the pages below it.
func (c *boltChecker) node(buf []byte, depth int, what string) error {
	if depth > boltMaxDepth {
		return damaged("%s: bucket tree deeper than %d levels (a cycle?)", what, boltMaxDepth)
	}
	if len(buf) < boltPageHeader {
		return damaged("%s: %d bytes, shorter than a page header", what, len(buf))
	}
	flags, count := boltOrder.Uint16(buf[8:]), int(boltOrder.Uint16(buf[10:]))
	if flags != boltBranchPage && flags != boltLeafPage {
		return damaged("%s: page type %#x is neither branch nor leaf", what, flags)
	}
	if boltPageHeader+count*boltElement > len(buf) {
		return damaged("%s: %d elements do not fit in %d bytes", what, count, len(buf))
	}
	for i := range count {
		off := boltPageHeader + i*boltElement
		e := buf[off : off+boltElement]
		if flags == boltBranchPage {
			pos, ksize := uint64(boltOrder.Uint32(e)), uint64(boltOrder.Uint32(e[4:]))
			if uint64(off)+pos+ksize > uint64(len(buf)) {
				return damaged("%s: key of element %d lies outside the page", what, i)
			}
			if err := c.tree(boltOrder.Uint64(e[8:]), depth+1, what+" child"); err != nil {
				return err
			}
			continue
		}
		eflags := boltOrder.Uint32(e)
		pos, ksize, vsize := uint64(boltOrder.Uint32(e[4:])), uint64(boltOrder.Uint32(e[8:])), uint64(boltOrder.Uint32(e[12:]))
		end := uint64(off) + pos + ksize + vsize
		if end > uint64(len(buf)) {
			return damaged("%s: key or value of element %d lies outside the page", what, i)
		}
		if eflags&boltBucketLeaf == 0 {
			continue
		}
		v := buf[end-vsize : end]
		if len(v) < boltBucketHeader {
			return damaged("%s: bucket header of element %d is %d bytes", what, i, len(v))
		}
		name := fmt.Sprintf("bucket %q", buf[uint64(off)+pos:uint64(off)+pos+ksize])
		if root := boltOrder.Uint64(v); root != 0 {
			if err := c.tree(root, depth+1, name); err != nil {
				return err
			}
		} else if err := c.node(v[boltBucketHeader:], depth+1, name+" (inline)"); err != nil {
			return err
		}
	}
	return nil
}
